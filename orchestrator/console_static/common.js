// Shared by the console's pages: CSRF-protected POSTs and safe DOM building
// (textContent only: nothing from the gateway is ever parsed as HTML).
export const csrf = document.querySelector('meta[name="csrf"]').content;

export async function post(path, fields = {}) {
  const body = new URLSearchParams(fields);
  const response = await fetch(path, {
    method: 'POST',
    headers: { 'X-CSRF-Token': csrf, Accept: 'application/json' },
    body,
    credentials: 'same-origin',
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.error || `HTTP ${response.status}`);
  return data;
}

export async function state(agent) {
  const query = agent ? `?agent=${encodeURIComponent(agent)}` : '';
  const response = await fetch(`/console/api/state${query}`, { credentials: 'same-origin' });
  if (response.status === 401) { location.assign('/console/login'); return null; }
  return response.json();
}

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === 'text') node.textContent = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

export function clock(ts) {
  return ts ? new Date(ts * 1000).toLocaleTimeString() : '-';
}

export function approvalCard(a, onError) {
  const left = Math.max(0, Math.round(a.expires_at - Date.now() / 1000));
  const reason = el('input', { type: 'text', placeholder: 'reason (optional)', class: 'reason' });
  const decide = (what) => async () => {
    try { await post(`/console/act/${what}/${encodeURIComponent(a.id)}`, { reason: reason.value }); }
    catch (error) { onError(error.message); }
  };
  const card = el('div', { class: 'approval', 'data-approval': a.id },
    el('b', { text: `${a.agent}: ${a.description}` }),
    el('div', { text: `${a.category} · ${a.rule} · ${left} s left` }));
  if (a.has_screenshot) {
    card.append(el('img', { src: `/console/approvals/${encodeURIComponent(a.id)}/screenshot.png`, alt: 'masked screen when it was raised' }));
  }
  card.append(
    el('button', { class: 'approve', text: 'Approve', onclick: decide('approve') }),
    el('button', { class: 'deny', text: 'Deny', onclick: decide('deny') }),
    reason);
  return card;
}
