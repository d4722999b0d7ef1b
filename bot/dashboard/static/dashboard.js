// longcall dashboard: live updates without a reload, and the event filter. No dependencies,
// no build step. The server renders every page; this only polls a change marker and swaps in
// the freshly rendered body (server-escaped HTML from our own origin, see the CSP).
(function () {
  "use strict";
  var POLL_MS = 2000;
  var main = document.getElementById("live");
  var status = document.getElementById("live-status");
  if (!main) { return; }
  var versionUrl = main.getAttribute("data-version-url");
  var fragmentUrl = main.getAttribute("data-fragment-url");
  var version = null;
  var busy = false;

  function setStatus(text, cls) {
    if (!status) { return; }
    status.textContent = text;
    status.className = "live-status " + (cls || "");
  }

  function applyFilter() {
    var kind = document.getElementById("event-kind");
    var text = document.getElementById("event-filter");
    var wantKind = kind ? kind.value : "";
    var wantText = text ? text.value.toLowerCase() : "";
    var rows = document.querySelectorAll("table.events tbody tr");
    for (var i = 0; i < rows.length; i++) {
      var row = rows[i];
      var ok = (!wantKind || row.getAttribute("data-event") === wantKind) &&
               (!wantText || row.textContent.toLowerCase().indexOf(wantText) !== -1);
      row.hidden = !ok;
    }
  }

  function keepFilterState(swap) {
    var kind = document.getElementById("event-kind");
    var text = document.getElementById("event-filter");
    var kindValue = kind ? kind.value : "";
    var textValue = text ? text.value : "";
    var focused = document.activeElement && document.activeElement.id;
    swap();
    kind = document.getElementById("event-kind");
    text = document.getElementById("event-filter");
    if (kind) { kind.value = kindValue; }
    if (text) { text.value = textValue; }
    if (focused === "event-filter" && text) { text.focus(); }
    applyFilter();
  }

  document.addEventListener("input", function (ev) {
    if (ev.target && (ev.target.id === "event-filter" || ev.target.id === "event-kind")) { applyFilter(); }
  });
  document.addEventListener("change", function (ev) {
    if (ev.target && ev.target.id === "event-kind") { applyFilter(); }
  });

  function poll() {
    if (busy || !versionUrl || !fragmentUrl) { return; }
    busy = true;
    fetch(versionUrl, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { if (!r.ok) { throw new Error(String(r.status)); } return r.json(); })
      .then(function (data) {
        if (version === null) { version = data.version; return null; }
        if (data.version === version) { return null; }
        version = data.version;
        return fetch(fragmentUrl, { credentials: "same-origin", cache: "no-store" })
          .then(function (r) { if (!r.ok) { throw new Error(String(r.status)); } return r.text(); })
          .then(function (html) {
            var y = window.scrollY;
            var box = document.querySelector("[data-testid=transcript]");
            var boxY = box ? box.scrollTop : 0;
            keepFilterState(function () { main.innerHTML = html; });
            box = document.querySelector("[data-testid=transcript]");
            if (box) { box.scrollTop = boxY; }
            window.scrollTo(0, y);
            main.setAttribute("data-updates", String(Number(main.getAttribute("data-updates") || "0") + 1));
          });
      })
      .then(function () { setStatus("live · updated " + new Date().toLocaleTimeString(), "ok"); })
      .catch(function (err) { setStatus("not updating (" + err.message + ")", "bad"); })
      .then(function () { busy = false; });
  }

  // Open the transcript at the horizon: the line is what an operator looks for first.
  function showHorizon() {
    var box = document.querySelector("[data-testid=transcript]");
    var line = document.querySelector("[data-testid=horizon]");
    if (box && line) { box.scrollTop = Math.max(0, line.offsetTop - box.offsetTop - 160); }
  }

  applyFilter();
  showHorizon();
  if (versionUrl) {
    setStatus("live", "ok");
    poll();
    window.setInterval(poll, POLL_MS);
  }
})();
