// Drag and drop onto the spec upload form: a dropped file is put into the form's own file input and
// the form is submitted as usual. Without JavaScript the plain file input and button still work.
(function () {
  "use strict";
  function enhance(form) {
    var zone = form.querySelector(".drop-zone");
    var input = form.querySelector('input[type="file"]');
    if (!zone || !input) return;
    var hint = zone.querySelector(".drop-hint");
    if (hint) hint.hidden = false;
    zone.classList.add("drop-ready");
    ["dragenter", "dragover"].forEach(function (name) {
      zone.addEventListener(name, function (event) {
        event.preventDefault();
        zone.classList.add("dragging");
      });
    });
    ["dragleave", "drop"].forEach(function (name) {
      zone.addEventListener(name, function () { zone.classList.remove("dragging"); });
    });
    zone.addEventListener("drop", function (event) {
      event.preventDefault();
      var files = event.dataTransfer && event.dataTransfer.files;
      if (!files || files.length !== 1) return;
      input.files = files;
      if (form.requestSubmit) form.requestSubmit(); else form.submit();
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("form[data-drop-upload]").forEach(enhance);
  });
})();
