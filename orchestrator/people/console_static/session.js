// One session: live view (noVNC over the gateway's authenticated WebSocket), pending
// approvals with the screenshot that raised them, take over / hand back / stop, and
// the timeline, newest first.
import RFB from '/console/novnc/core/rfb.js';
import { clock, el, post, renderApprovals, state } from './common.js';
import { syncTimeline } from './player.js';

const agent = document.body.dataset.agent;
const stateEl = document.getElementById('state');
const vncStatus = document.getElementById('vnc-status');
const actError = document.getElementById('act-error');
const approvals = document.getElementById('approvals');
const timeline = document.getElementById('timeline');
const showError = (message) => { actError.textContent = message; };

let rfb = null;
function connect() {
  const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
  rfb = new RFB(document.getElementById('screen'),
    `${scheme}://${location.host}/console/sessions/${encodeURIComponent(agent)}/vnc`,
    { shared: true });
  rfb.scaleViewport = true;
  rfb.viewOnly = false;  // input is sent; the gateway forwards it only for the seat holder
  rfb.addEventListener('connect', () => { vncStatus.textContent = 'live'; vncStatus.dataset.state = 'live'; });
  rfb.addEventListener('disconnect', () => {
    vncStatus.textContent = 'disconnected'; vncStatus.dataset.state = 'disconnected';
    setTimeout(connect, 2000);
  });
}
connect();

for (const what of ['takeover', 'handback', 'stop']) {
  document.getElementById(what).addEventListener('click', async () => {
    actError.textContent = '';
    try { await post(`/console/act/${what}/${encodeURIComponent(agent)}`); refresh(); }
    catch (error) { showError(error.message); }
  });
}

function thumbOf(e) {
  return e.thumb === 'ready'
    ? el('img', { src: `/console/sessions/${encodeURIComponent(agent)}/timeline/${e.seq}.png`, alt: 'masked screen after this step' })
    : el('span', { class: 'nothumb', text: e.thumb === 'pending' ? 'thumbnail…' : 'no thumbnail (a burst of actions)' });
}

function entry(e) {
  return el('li', { 'data-seq': String(e.seq), 'data-tool': e.tool, 'data-thumb': e.thumb, 'data-at': String(e.at) },
    thumbOf(e),
    el('div', {},
      el('div', { text: `${clock(e.at)} · ${e.tool} · ${e.actor}` }),
      el('div', { class: 'step', text: e.step }),
      el('div', { class: 'outcome', text: e.outcome })));
}

// Newest first; existing rows are updated in place (outcome, thumbnail), new ones added.
function renderTimeline(entries) {
  const rows = new Map([...timeline.children].map((li) => [li.dataset.seq, li]));
  let before = timeline.firstChild;
  for (const e of entries) {
    let li = rows.get(String(e.seq));
    if (!li) { li = entry(e); timeline.insertBefore(li, before); }
    else {
      li.querySelector('.outcome').textContent = e.outcome;
      if (li.dataset.thumb !== e.thumb) { li.firstChild.replaceWith(thumbOf(e)); li.dataset.thumb = e.thumb; }
    }
    rows.delete(String(e.seq));
    before = li.nextSibling;
  }
  for (const gone of rows.values()) gone.remove();
}

// The session's recording so far, in step with the timeline: an entry is at its wall
// time less the recording's start. "Load the latest" reloads what was written since.
const player = document.getElementById('player');
const recordingState = document.getElementById('recording-state');
let recording = null;
const markCurrent = syncTimeline(player, timeline, (li) => Number(li.dataset.at) - (recording ? recording.started_at : NaN));
function showRecording(found) {
  if (!found) { recordingState.textContent = 'not recorded'; return; }
  recordingState.textContent = found.stopped
    ? `recording ${found.id} stopped: ${found.stopped}` : `recording ${found.id}`;
  if (recording && recording.id === found.id) return;
  recording = found;
  player.src = `/console/recordings/${encodeURIComponent(found.id)}/video.webm`;
}
document.getElementById('latest').addEventListener('click', () => {
  if (!recording) return;
  const at = player.currentTime;
  player.src = `/console/recordings/${encodeURIComponent(recording.id)}/video.webm?at=${Date.now()}`;
  player.addEventListener('loadedmetadata', () => { player.currentTime = at; markCurrent(); }, { once: true });
});

async function refresh() {
  const data = await state(agent);
  if (!data) return;
  if (!data.session) { stateEl.textContent = 'ended'; stateEl.dataset.state = 'ended'; return; }
  stateEl.textContent = data.session.state;
  stateEl.dataset.state = data.session.controller;
  const pending = data.approvals.filter((a) => a.state === 'pending' && (a.agent === agent || a.session === data.session.session));
  renderApprovals(approvals, pending, showError);
  renderTimeline(data.timeline || []);
  showRecording(data.recording);
}

window.corralStarted = true;  // boot.js: the module loaded
refresh();
setInterval(refresh, 1000);
