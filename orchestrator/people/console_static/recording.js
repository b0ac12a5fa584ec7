// One recording: its video and its timeline side by side, in step (player.js).
import { clock, el } from './common.js';
import { syncTimeline } from './player.js';

const rid = document.body.dataset.recording;
const video = document.getElementById('player');
const list = document.getElementById('timeline');

function describe(e) {
  if (e.event === 'approval_decided') return `approval ${e.approval}: ${e.state} by ${e.operator || '-'}`;
  if (e.event === 'frame_blacked') return `frames blacked: ${e.why}`;
  if (e.event === 'recording_stopped') return `recording stopped: ${e.why}`;
  return `${e.tool} · ${e.step} · ${e.outcome}`;
}

async function load() {
  const response = await fetch(`/console/recordings/${encodeURIComponent(rid)}/timeline.json`, { credentials: 'same-origin' });
  if (response.status === 401) { location.assign('/console/login'); return; }
  const data = await response.json();
  for (const e of data.timeline) {
    list.append(el('li', { 'data-t': String(e.t), 'data-tool': e.tool || e.event || '', 'data-actor': e.actor || '' },
      el('div', { text: `${e.t.toFixed(1)} s · ${clock(e.at)} · ${e.actor || 'corral'}` }),
      el('div', { class: 'step', text: describe(e) })));
  }
  syncTimeline(video, list, (li) => Number(li.dataset.t))();
}

window.corralStarted = true;  // boot.js: the module loaded
load();
