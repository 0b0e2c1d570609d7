// Runs before the app's modules have loaded (index.html, async): starts the first page's slowest
// request at once, so it goes on while the modules load. The page takes the answer over when it
// asks for exactly the same URL (js/api.js); on any other page nothing here happens.
(function () {
  "use strict";
  try {
    start();
  } catch (e) {
    // a malformed address: the app says so when it routes
  }

function start() {
  var m = /^#\/(runs|experiments)\/([^/?]+)(?:\?(.*))?$/.exec(location.hash);
  if (!m || !window.fetch || !window.URLSearchParams) return;
  var url;
  if (m[1] === "runs") {
    if (!/^\d+$/.test(m[2])) return;
    url = "/api/v1/runs/" + m[2] + "/metrics?points=1000"; // = run.js, CURVE_POINTS
  } else {
    // = experiment.js, tableUrl(): the same parameters in the same order
    var q = new URLSearchParams(m[3] || "");
    var limit = Number(q.get("limit"));
    var p = new URLSearchParams({
      sort: q.get("sort") || "id",
      order: q.get("order") || "asc",
      offset: String(Math.max(0, Number(q.get("offset")) || 0)),
      limit: String([25, 50, 100, 200].indexOf(limit) >= 0 ? limit : 50),
    });
    if (q.get("q")) p.set("q", q.get("q"));
    if (q.get("state")) p.set("state", q.get("state"));
    url = "/api/v1/experiments/" + encodeURIComponent(decodeURIComponent(m[2])) + "/table?" + p;
  }
  window.droverEarly = {
    url: url,
    response: fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin", cache: "no-store" }),
  };
  window.droverEarly.response.catch(function () {});
}
})();
