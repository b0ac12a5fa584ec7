// One session: live view (noVNC over the gateway's authenticated WebSocket), pending
// approvals with the screenshot that raised them, take over / hand back / stop, and
// the timeline, newest first.
import RFB from '/console/novnc/core/rfb.js';
import { approvalCard, clock, el, post, state } from './common.js';

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

function entry(e) {
  const thumb = e.thumb === 'ready'
    ? el('img', { src: `/console/sessions/${encodeURIComponent(agent)}/timeline/${e.seq}.png`, alt: 'masked screen after this step' })
    : el('span', { class: 'nothumb', text: e.thumb === 'pending' ? 'thumbnail…' : 'no thumbnail (a burst of actions)' });
  return el('li', { 'data-seq': String(e.seq), 'data-tool': e.tool },
    thumb,
    el('div', {},
      el('div', { text: `${clock(e.at)} · ${e.tool} · ${e.actor}` }),
      el('div', { class: 'step', text: e.step }),
      el('div', { class: 'outcome', text: e.outcome })));
}

async function refresh() {
  const data = await state(agent);
  if (!data) return;
  if (!data.session) { stateEl.textContent = 'ended'; stateEl.dataset.state = 'ended'; return; }
  stateEl.textContent = data.session.state;
  stateEl.dataset.state = data.session.controller;
  const pending = data.approvals.filter((a) => a.state === 'pending' && a.agent === agent);
  approvals.replaceChildren(...(pending.length ? pending.map((a) => approvalCard(a, showError)) : [el('p', { text: 'None.' })]));
  timeline.replaceChildren(...(data.timeline || []).map(entry));
}

refresh();
setInterval(refresh, 1000);
