// The audit log's live tail: new rows (already filtered and rendered by the server) arrive over a
// websocket and go to the top of the table; a reload replaces the table with the newest page (sent
// once the tail is open, and when the server found that it missed rows, which the status then says).
// Reconnects with a growing pause if the link drops.
(function () {
  "use strict";
  var status = document.getElementById("live-status");
  var body = document.getElementById("audit-rows");
  if (!status || !body || !window.WebSocket) return;
  var MAX_ROWS = 500; // the page stays light however long it stays open
  var LIVE = "Live tail: new calls appear at the top.";
  var delay = 1000;

  function rowsOf(html) {
    var holder = document.createElement("tbody");
    holder.innerHTML = html;
    return Array.prototype.slice.call(holder.rows);
  }

  function shown(key) {
    return Array.prototype.some.call(body.rows, function (row) { return row.dataset.key === key; });
  }

  function prepend(html) {
    // A row written as the tail opened can come both in the reload and live: show it once.
    var fresh = rowsOf(html).filter(function (row) { return !shown(row.dataset.key); });
    for (var i = fresh.length - 1; i >= 0; i--) body.insertBefore(fresh[i], body.firstChild);
    while (body.rows.length > MAX_ROWS) body.deleteRow(-1);
  }

  function reload(html, missed) {
    body.innerHTML = html;
    if (missed) {
      status.textContent = "Live tail: some calls could not be shown live, so the table was reloaded at " +
        new Date().toLocaleTimeString() + ". New calls appear at the top.";
    }
  }

  function connect() {
    var scheme = location.protocol === "https:" ? "wss:" : "ws:";
    var socket = new WebSocket(scheme + "//" + location.host + status.dataset.url);
    socket.onopen = function () {
      delay = 1000;
      status.textContent = LIVE;
    };
    socket.onmessage = function (event) {
      var message = JSON.parse(event.data);
      var html = message.reload !== undefined ? message.reload : message.rows;
      var empty = document.getElementById("audit-empty");
      if (empty && rowsOf(html).length) empty.remove();
      if (message.reload !== undefined) reload(message.reload, message.missed);
      else prepend(message.rows);
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
