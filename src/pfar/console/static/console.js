// The console live: each committed task event refreshes the page's live sections
// (marked data-live) from the server; a lost connection (the kernel restarted, the
// phone slept) is said, the browser reconnects with the last event it saw, and the
// page is read again once the kernel is back.
(function () {
  "use strict";
  const status = document.getElementById("live");
  let lost = false;
  let pending = null;

  function say(state, text) {
    if (!status) return;
    status.dataset.state = state;
    status.textContent = text;
  }

  async function refresh() {
    pending = null;
    const parts = document.querySelectorAll("[data-live]");
    if (!parts.length) return;
    let page;
    try {
      const answer = await fetch(location.href, { credentials: "same-origin" });
      if (answer.redirected || !answer.ok) return;  // logged out, or gone: leave the page as it is
      page = new DOMParser().parseFromString(await answer.text(), "text/html");
    } catch (e) {
      return;
    }
    const fresh = page.querySelectorAll("[data-live]");
    if (fresh.length !== parts.length) return;
    const focused = document.activeElement && document.activeElement.closest("[data-live]");
    parts.forEach(function (part, i) {
      if (focused === part) return;  // never pull a form from under the owner's keyboard
      part.replaceWith(document.importNode(fresh[i], true));
    });
  }

  function soon() {
    if (pending === null) pending = setTimeout(refresh, 150);
  }

  const events = new EventSource("/live");
  events.addEventListener("open", function () {
    if (lost) {
      say("back", "reconnected: the kernel is back");
      soon();
    } else {
      say("live", "live");
    }
    lost = false;
  });
  events.addEventListener("task", soon);
  document.addEventListener("pfar:changed", soon);  // a view of the page's own saw news
  events.addEventListener("error", function () {
    lost = true;
    say("lost", "connection to the kernel lost; reconnecting…");
  });
})();
