import { clock, el, renderApprovals, state } from './common.js';

const tbody = document.querySelector('#sessions tbody');
const approvals = document.getElementById('approvals');

function cells(s) {
  return [
    el('td', {}, el('a', { href: `/console/sessions/${encodeURIComponent(s.agent)}`, text: s.agent })),
    el('td', { text: s.kind }), el('td', { text: clock(s.started_at) }),
    el('td', { class: 'actions', text: `${s.actions_used} / ${s.actions_left}` }),
    el('td', { class: 'state', text: s.state }),
  ];
}

// Rows stay in place while their session runs (a row rebuilt under the mouse would
// swallow a click); only the counters and the state change.
function renderSessions(sessions) {
  const rows = new Map([...tbody.querySelectorAll('tr[data-agent]')].map((tr) => [tr.dataset.agent, tr]));
  for (const s of sessions) {
    const tr = rows.get(s.agent);
    if (tr && tr.dataset.session === s.session) {
      tr.querySelector('.actions').textContent = `${s.actions_used} / ${s.actions_left}`;
      tr.querySelector('.state').textContent = s.state;
      rows.delete(s.agent);
    } else {
      if (tr) { tr.remove(); rows.delete(s.agent); }
      tbody.append(el('tr', { 'data-agent': s.agent, 'data-session': s.session }, ...cells(s)));
    }
  }
  for (const gone of rows.values()) gone.remove();
  const empty = tbody.querySelector('tr.empty');
  if (sessions.length && empty) empty.remove();
  if (!sessions.length && !empty) tbody.append(el('tr', { class: 'empty' }, el('td', { colspan: '5', text: 'No running sessions.' })));
}

async function refresh() {
  const data = await state();
  if (!data) return;
  renderSessions(data.sessions);
  renderApprovals(approvals, data.approvals.filter((a) => a.state === 'pending'), () => {});
}

window.corralStarted = true;  // boot.js: the module loaded
refresh();
setInterval(refresh, 1000);
