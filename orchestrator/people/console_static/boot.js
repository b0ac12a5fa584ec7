// A classic script beside each page's module: if the module never started (its load
// was cut, e.g. Chromium drops in-flight loads with ERR_NETWORK_CHANGED when a session
// creates its network), reload the page once a few seconds later.
(function () {
  var key = 'corral-boot-reloads';
  setTimeout(function () {
    if (window.corralStarted) { sessionStorage.removeItem(key); return; }
    var tries = Number(sessionStorage.getItem(key) || '0');
    if (tries < 5) { sessionStorage.setItem(key, String(tries + 1)); location.reload(); }
  }, 4000);
})();
