// A host's tools list: a checkbox with data-select-all ticks or clears every tool checkbox of its form.
// Delegated from the document, so it works on rows htmx swaps in. Without JavaScript the box is hidden.
(function () {
  "use strict";
  function reveal(root) {
    root.querySelectorAll("input[data-select-all]").forEach(function (box) { box.hidden = false; });
  }
  document.addEventListener("change", function (event) {
    var box = event.target;
    if (!box.matches || !box.matches("input[data-select-all]") || !box.form) { return; }
    box.form.querySelectorAll("input[type=checkbox][name=tool]").forEach(function (tool) { tool.checked = box.checked; });
  });
  document.addEventListener("htmx:afterSwap", function (event) { reveal(event.target); });
  reveal(document);
})();
