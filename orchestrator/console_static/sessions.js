import { approvalCard, clock, el, state } from './common.js';

const tbody = document.querySelector('#sessions tbody');
const approvals = document.getElementById('approvals');

async function refresh() {
  const data = await state();
  if (!data) return;
  tbody.replaceChildren(...(data.sessions.length ? data.sessions.map((s) => el('tr', { 'data-agent': s.agent },
    el('td', {}, el('a', { href: `/console/sessions/${encodeURIComponent(s.agent)}`, text: s.agent })),
    el('td', { text: s.kind }), el('td', { text: clock(s.started_at) }),
    el('td', { text: `${s.actions_used} / ${s.actions_left}` }),
    el('td', { class: 'state', text: s.state }))) : [el('tr', { class: 'empty' }, el('td', { colspan: '5', text: 'No running sessions.' }))]));
  const pending = data.approvals.filter((a) => a.state === 'pending');
  approvals.replaceChildren(...(pending.length ? pending.map((a) => approvalCard(a, () => {})) : [el('p', { text: 'None.' })]));
}

refresh();
setInterval(refresh, 1000);
