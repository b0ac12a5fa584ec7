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

function leftText(a) {
  const left = Math.max(0, Math.round(a.expires_at - Date.now() / 1000));
  return `${a.category} · ${a.rule} · ${left} s left`;
}

// The exact action the approval is for (issue 22 item 1), as the gateway bound it: the
// tool, its parameters (typed text as its length), the surface, the target as read and
// their digest. The agent's own words, when there are any, are in the description,
// labelled as the agent's (a codrive step's "(the agent says: …)").
function boundAction(a) {
  const action = a.action || {};
  const row = (label, value) => el('div', {},
    el('span', { class: 'label', text: `${label}: ` }), el('code', { text: value }));
  const box = el('div', { class: 'bound' },
    row('tool', action.tool || a.tool),
    row('surface', action.surface || a.session),
    row('parameters', JSON.stringify(action.params ?? null)),
    row('target as read', JSON.stringify(action.target ?? null)),
    row('digest', a.digest ? `sha256 ${a.digest}` : '- (not bound to one input)'));
  return box;
}

export function approvalCard(a, onError) {
  const reason = el('input', { type: 'text', placeholder: 'reason (optional)', class: 'reason' });
  const decide = (what) => async () => {
    try {
      await post(`/console/act/${what}/${encodeURIComponent(a.id)}`, { reason: reason.value });
      card.remove();  // decided: gone at once, not at the next refresh
    } catch (error) { onError(error.message); }
  };
  // The buttons come first and the screenshot's box is sized before it loads: nothing
  // moves under the operator's pointer while the image arrives.
  const card = el('div', { class: 'approval', id: `approval-${a.id}`, 'data-approval': a.id },
    el('b', { text: `${a.agent}: ${a.description}` }),
    el('div', { class: 'left', text: leftText(a) }),
    boundAction(a),
    el('div', { class: 'decide' },
      el('button', { class: 'approve', text: 'Approve', onclick: decide('approve') }),
      el('button', { class: 'deny', text: 'Deny', onclick: decide('deny') }),
      reason));
  addShot(card, a);
  return card;
}

// The masked screenshot is taken just after the approval is raised: a card shown before
// it came gets it at a later refresh, below the buttons (nothing moves under the pointer).
function addShot(card, a) {
  if (a.has_screenshot && !card.querySelector('img.shot')) {
    card.append(el('img', { src: `/console/approvals/${encodeURIComponent(a.id)}/screenshot.png`, alt: 'masked screen when it was raised', class: 'shot' }));
  }
}

// Keep the cards of still-pending approvals in place (a card rebuilt under the mouse
// would swallow a click, and a reason being typed would be lost); add new ones, drop
// decided ones, refresh the countdown, add a screenshot that came since.
export function renderApprovals(container, pending, onError) {
  const wanted = new Map(pending.map((a) => [a.id, a]));
  for (const card of [...container.querySelectorAll('.approval')]) {
    const a = wanted.get(card.dataset.approval);
    if (!a) card.remove();
    else {
      card.querySelector('.left').textContent = leftText(a);
      addShot(card, a);
      wanted.delete(a.id);
    }
  }
  for (const a of wanted.values()) {
    const card = approvalCard(a, onError);
    container.append(card);
    // A link to one approval (the chat's elicitation, /console/#approval-ID): shown
    // and marked once its card exists.
    if (location.hash === `#${card.id}`) {
      card.classList.add('linked');
      card.scrollIntoView({ block: 'center' });
    }
  }
  const none = container.querySelector('.none');
  if (pending.length && none) none.remove();
  if (!pending.length && !none) container.append(el('p', { class: 'none', text: 'None.' }));
}
