// A loop task's conversation, live: each turn as it is journaled (rendered and escaped
// by the server), the model's text as it streams (set as text, never as HTML), and
// after a lost connection the turns after the last one shown (Last-Event-ID).
(function () {
  "use strict";
  const box = document.getElementById("conversation");
  if (!box || !box.dataset.follow || !window.EventSource) return;
  const list = box.querySelector("ol.conversation");
  const streaming = box.querySelector(".streaming");
  const streamed = streaming.querySelector("pre");
  const note = box.querySelector(".conversation-note");
  let last = parseInt(box.dataset.lastSeq, 10);

  function unstream() {
    streamed.textContent = "";
    streaming.hidden = true;
  }

  const events = new EventSource(box.dataset.follow + "?after=" + last);
  events.addEventListener("turn", function (e) {
    const turn = JSON.parse(e.data);
    if (turn.seq <= last) return;
    const empty = box.querySelector(".empty");
    if (empty) empty.remove();
    list.insertAdjacentHTML("beforeend", turn.html);
    last = turn.seq;
    if (turn.kind === "assistant") unstream();
    // a turn is no event of the bus: the page's other live parts (its timeline, its
    // steps) are told to read again, as a bus event would have them
    document.dispatchEvent(new Event("pfar:changed"));
  });
  events.addEventListener("text", function (e) {
    streamed.textContent += JSON.parse(e.data).text;
    streaming.hidden = false;
  });
  events.addEventListener("retry", function (e) {
    unstream();
    note.textContent = JSON.parse(e.data).text;
  });
  events.addEventListener("state", function (e) {
    const state = JSON.parse(e.data).state;
    note.textContent = "the task is " + state;
    const heading = document.querySelector("h1 .state");  // the page's title says it too
    if (heading) {
      heading.textContent = state;
      heading.className = "state state-" + state;
    }
    document.dispatchEvent(new Event("pfar:changed"));
  });
  events.addEventListener("ended", function () {
    events.close();  // the task ended: nothing more will be said
    unstream();
  });
})();
