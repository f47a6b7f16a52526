// The audit log's live tail: new rows (already filtered and rendered by the server) arrive over a
// websocket and go to the top of the table. Reconnects with a growing pause if the link drops.
(function () {
  "use strict";
  var status = document.getElementById("live-status");
  var body = document.getElementById("audit-rows");
  if (!status || !body || !window.WebSocket) return;
  var MAX_ROWS = 500; // the page stays light however long it stays open
  var delay = 1000;

  function connect() {
    var scheme = location.protocol === "https:" ? "wss:" : "ws:";
    var socket = new WebSocket(scheme + "//" + location.host + status.dataset.url);
    socket.onopen = function () {
      delay = 1000;
      status.textContent = "Live tail: new calls appear at the top.";
    };
    socket.onmessage = function (event) {
      var empty = document.getElementById("audit-empty");
      if (empty) empty.remove();
      body.insertAdjacentHTML("afterbegin", event.data);
      while (body.rows.length > MAX_ROWS) body.deleteRow(-1);
    };
    socket.onclose = function (event) {
      if (event.code === 4403 || event.code === 4404) {
        status.textContent = "Live tail unavailable.";
        return;
      }
      status.textContent = "Live tail: reconnecting…";
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 30000);
    };
  }
  connect();
})();
