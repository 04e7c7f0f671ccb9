'use strict';
// Shows why the last login failed (the server names it in ?error=) and
// drops it from the address bar.
(function () {
  const params = new URLSearchParams(location.search);
  const err = params.get('error');
  if (err) {
    const p = document.getElementById('login-error');
    p.textContent = 'Not logged in: ' + err + '.';
    p.hidden = false;
    history.replaceState(null, '', location.pathname);
  }
})();
