// Copy buttons for secrets shown once: <button data-copy="#id" hidden> copies the text of #id.
// Without JavaScript the button stays hidden and the text is selected with one click (CSS user-select: all).
(function () {
  "use strict";
  function select(element) {
    var range = document.createRange();
    range.selectNodeContents(element);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }
  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    var target = document.querySelector(button.getAttribute("data-copy"));
    if (!target) { return; }
    var status = button.parentElement.querySelector(".copy-status");
    function say(text) { if (status) { status.textContent = text; } }
    button.hidden = false;
    button.addEventListener("click", function () {
      var text = target.textContent.trim();
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(function () { say("Copied."); }, function () {
          select(target); say("Selected: press Ctrl+C (⌘C) to copy.");
        });
      } else {
        select(target);
        say(document.execCommand("copy") ? "Copied." : "Selected: press Ctrl+C (⌘C) to copy.");
      }
    });
  });
})();
