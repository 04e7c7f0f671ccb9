'use strict';
// The Lattice dashboard: one page per hash route (#/queue, #/job/ID,
// #/nodes, #/power, #/history, #/tenants, #/dags), reading the REST API under
// /api/v1/ with the session cookie. Live state comes from the server-sent
// events of /api/v1/events. Every text from the server goes into the page
// as text (never as HTML).

// ---- small helpers -------------------------------------------------------

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

const SVG = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, ...children) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children.flat()) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  return e;
}

function num(v) { return v === undefined || v === null || v === '' ? 0 : Number(v); }
function pad(n) { return String(n).padStart(2, '0'); }
function fmtTime(ms) {
  ms = num(ms);
  if (!ms) return '—';
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}
function fmtDur(s) {
  s = Math.max(0, Math.round(s));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), x = s % 60;
  return h ? `${h}:${pad(m)}:${pad(x)}` : `${m}:${pad(x)}`;
}
function stateEl(s) { return el('span', { class: `state s-${s}` }, s || '—'); }
function watts(w) { w = num(w); return w >= 10000 ? `${(w / 1000).toFixed(1)} kW` : `${w} W`; }

class APIError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(path, opts = {}) {
  const init = { credentials: 'same-origin', headers: { Accept: 'application/json' }, ...opts };
  if (opts.body !== undefined) {
    init.body = JSON.stringify(opts.body);
    init.headers['Content-Type'] = 'application/json';
  }
  const r = await fetch('/api/v1' + path, init);
  if (r.status === 401) {
    location.href = '/ui/login?error=' + encodeURIComponent('your session has ended; log in again');
    throw new APIError(401, 'not logged in');
  }
  const text = await r.text();
  let body = {};
  try { body = text ? JSON.parse(text) : {}; } catch (e) { body = { message: text }; }
  if (!r.ok) throw new APIError(r.status, body.message || r.statusText);
  return body;
}

function say(msg, isError) {
  const live = document.getElementById('live');
  live.textContent = msg;
  live.className = 'live' + (isError ? ' error' : '');
  clearTimeout(say.t);
  say.t = setTimeout(() => { live.textContent = ''; }, 8000);
}

// ---- who is looking, and the live state --------------------------------

let me = { auth_enabled: false, role: 'admin', user: '', tenants: [] };
const store = { allocs: new Map(), nodes: new Map(), listeners: new Set(), live: false };

function isAdmin() { return !me.auth_enabled || me.role === 'admin'; }
function mayChange(a) {
  if (isAdmin()) return true;
  const r = a.request || {};
  if (me.role === 'tenant-admin' && (me.tenants.includes(r.tenant) || me.tenants.includes('*'))) return true;
  return r.user === me.user;
}

function startEvents() {
  const es = new EventSource('/api/v1/events');
  let changed = null;
  const notify = () => {
    if (changed) return;
    changed = setTimeout(() => { changed = null; store.listeners.forEach((f) => f()); }, 150);
  };
  es.addEventListener('allocation', (e) => { const a = JSON.parse(e.data); store.allocs.set(a.id, a); notify(); });
  es.addEventListener('allocation-removed', (e) => { store.allocs.delete(JSON.parse(e.data).id); notify(); });
  es.addEventListener('node', (e) => { const n = JSON.parse(e.data); store.nodes.set(n.name, n); notify(); });
  es.addEventListener('open', () => { store.live = true; });
  es.addEventListener('error', () => { store.live = false; });
}

// onStore re-renders a page on state changes while it is shown.
function onStore(fn) {
  store.listeners.add(fn);
  return () => store.listeners.delete(fn);
}

// ---- actions -------------------------------------------------------------

// armed asks for a second click before a destructive action.
function actionButton(label, run, danger) {
  const b = el('button', { type: 'button', class: danger ? 'danger' : '', 'data-action': label.toLowerCase() }, label);
  b.addEventListener('click', async () => {
    if (danger && !b.classList.contains('armed')) {
      b.classList.add('armed');
      b.textContent = `Confirm ${label.toLowerCase()}`;
      setTimeout(() => { b.classList.remove('armed'); b.textContent = label; }, 5000);
      return;
    }
    b.disabled = true;
    try {
      await run();
    } catch (e) {
      say(`${label} failed: ${e.message}`, true);
    } finally {
      b.disabled = false;
      b.classList.remove('armed');
      b.textContent = label;
    }
  });
  return b;
}

async function jobControl(verb, id) {
  const r = await api(`/allocations/${verb}`, { method: 'POST', body: { ids: [id] } });
  const res = (r.results || [])[0] || {};
  const ok = verb === 'cancel' ? res.cancelled : res.ok;
  if (!ok) throw new Error(res.error || 'refused');
  say(`${verb}: ${id} done`);
}

function allocActions(a) {
  if (!mayChange(a)) return el('span', { class: 'muted' }, '—');
  const id = a.display_id;
  const out = el('div', { class: 'actions' });
  if (['PENDING', 'STAGING', 'RUNNING', 'CHECKPOINTING', 'SUSPENDED'].includes(a.state)) {
    out.append(actionButton('Cancel', () => jobControl('cancel', id), true));
  }
  if (a.state === 'PENDING') {
    out.append(a.held ? actionButton('Release', () => jobControl('release', id)) : actionButton('Hold', () => jobControl('hold', id)));
  }
  return out;
}

// ---- pages ---------------------------------------------------------------

const ACTIVE = ['PENDING', 'STAGING', 'RUNNING', 'CHECKPOINTING', 'SUSPENDED'];
const ENDED = ['COMPLETED', 'FAILED', 'CANCELLED'];

function filterBar(fields, values, onchange) {
  const bar = el('form', { class: 'filters', role: 'search', onsubmit: (e) => e.preventDefault() });
  for (const f of fields) {
    let input;
    if (f.options) {
      input = el('select', { id: `f-${f.name}`, name: f.name }, el('option', { value: '' }, f.any || 'any'),
        f.options.map((o) => el('option', { value: o, selected: values[f.name] === o }, o)));
    } else {
      input = el('input', { id: `f-${f.name}`, name: f.name, type: 'search', value: values[f.name] || '', placeholder: f.placeholder || '' });
    }
    input.addEventListener('input', () => { values[f.name] = input.value; onchange(); });
    bar.append(el('label', { for: `f-${f.name}` }, f.label, input));
  }
  return bar;
}

// queue lists what `latticectl status` lists, filtered; an array's tasks
// are one row until opened.
function pageQueue(main) {
  const values = { state: 'active', user: '', tenant: '', vcluster: '' };
  const open = new Set();
  const table = el('div');
  const opts = () => {
    const all = [...store.allocs.values()];
    const uniq = (f) => [...new Set(all.map(f).filter(Boolean))].sort();
    return { tenants: uniq((a) => a.request.tenant), vclusters: uniq((a) => a.request.vcluster), users: uniq((a) => a.request.user) };
  };
  const o = opts();
  const bar = filterBar([
    { name: 'state', label: 'State', options: ['active', ...ACTIVE, ...ENDED], any: 'all' },
    { name: 'user', label: 'User', placeholder: 'user name' },
    { name: 'tenant', label: 'Tenant', placeholder: o.tenants.join(', ') || 'tenant' },
    { name: 'vcluster', label: 'vCluster', placeholder: o.vclusters.join(', ') || 'vCluster' },
  ], values, draw);
  values.state = 'active';
  bar.querySelector('#f-state').value = 'active';
  bar.querySelector('#f-state option[value=""]').textContent = 'all';
  main.append(el('h1', {}, 'Queue'), bar, table);

  function matches(a) {
    const r = a.request || {};
    if (values.state === 'active' && !ACTIVE.includes(a.state)) return false;
    if (values.state && values.state !== 'active' && a.state !== values.state) return false;
    if (values.user && !(r.user || '').includes(values.user)) return false;
    if (values.tenant && !(r.tenant || '').includes(values.tenant)) return false;
    if (values.vcluster && !(r.vcluster || '').includes(values.vcluster)) return false;
    return true;
  }
  function row(a, cls) {
    const r = a.request || {};
    return el('tr', { 'data-id': a.display_id, class: cls },
      el('td', {}, el('a', { href: `#/job/${a.display_id}` }, a.display_id)),
      el('td', {}, r.name), el('td', {}, r.user || '—'), el('td', {}, r.tenant), el('td', {}, r.vcluster),
      el('td', {}, stateEl(a.state), a.held ? el('span', { class: 'badge reserved' }, `held (${a.held})`) : null),
      el('td', {}, a.reason || ''),
      el('td', { class: 'num' }, a.nodes.length || r.nodes_min),
      el('td', {}, fmtTime(a.submit_time_unix_ms)),
      el('td', {}, allocActions(a)));
  }
  function draw() {
    const shown = [...store.allocs.values()].filter(matches).sort((x, y) => num(x.id) - num(y.id));
    const arrays = new Map();
    const rows = [];
    for (const a of shown) {
      const aj = num(a.array_job_id);
      if (aj) {
        if (!arrays.has(aj)) { arrays.set(aj, []); rows.push({ array: aj }); }
        arrays.get(aj).push(a);
      } else rows.push({ a });
    }
    const body = el('tbody');
    for (const x of rows) {
      if (x.a) { body.append(row(x.a)); continue; }
      const tasks = arrays.get(x.array);
      const counts = {};
      tasks.forEach((t) => { counts[t.state] = (counts[t.state] || 0) + 1; });
      const first = tasks[0], r = first.request || {};
      const isOpen = open.has(x.array);
      const toggle = el('button', { type: 'button', class: 'toggle', 'aria-expanded': String(isOpen), 'aria-label': `${isOpen ? 'collapse' : 'expand'} array ${x.array}` }, isOpen ? '▾' : '▸');
      toggle.addEventListener('click', () => { isOpen ? open.delete(x.array) : open.add(x.array); draw(); });
      body.append(el('tr', { class: 'array-row', 'data-array': String(x.array) },
        el('td', {}, toggle, `${x.array}_[${Math.min(...tasks.map((t) => t.array_index))}-${Math.max(...tasks.map((t) => t.array_index))}]`,
          el('br'), el('span', { class: 'muted' }, `${tasks.length} tasks`)),
        el('td', {}, r.name), el('td', {}, r.user || '—'), el('td', {}, r.tenant), el('td', {}, r.vcluster),
        el('td', {}, Object.entries(counts).map(([s, n]) => el('div', {}, stateEl(s), ` × ${n}`))),
        el('td', {}, ''), el('td', { class: 'num' }, r.nodes_min), el('td', {}, fmtTime(first.submit_time_unix_ms)),
        el('td', {}, mayChange(first) ? actionButton('Cancel', () => jobControl('cancel', String(x.array)), true) : '')));
      if (isOpen) tasks.forEach((t) => body.append(row(t, 'task-row')));
    }
    table.replaceChildren(el('p', { class: 'muted' }, `${shown.length} allocation(s)${store.live ? ', live' : ''}`),
      el('table', { id: 'queue' }, el('thead', {}, el('tr', {}, ['ID', 'Name', 'User', 'Tenant', 'vCluster', 'State', 'Reason', 'Nodes', 'Submitted', 'Actions'].map((h) => el('th', { scope: 'col' }, h)))), body));
  }
  draw();
  return onStore(draw);
}

// job is one allocation: its state history, the explain breakdown with the
// expected start, its steps, the workflow it belongs to, and its output.
function pageJob(main, id) {
  let stopped = false;
  const head = el('div'), explain = el('section', { id: 'explain-section' }), logs = el('section'), dag = el('section');
  main.append(el('h1', {}, `Allocation ${id}`), el('div', { class: 'cols' }, head, explain), logs, dag);
  let lastDag = null;

  async function load() {
    let a;
    try {
      a = await api(`/allocations/${encodeURIComponent(id)}`);
    } catch (e) {
      head.replaceChildren(el('p', { class: 'error', id: 'job-error' }, e.message));
      return;
    }
    const r = a.request || {};
    const elapsed = num(a.start_time_unix_ms) ? ((num(a.end_time_unix_ms) || Date.now()) - num(a.start_time_unix_ms)) / 1000 : 0;
    head.replaceChildren(
      el('dl', { class: 'kv' },
        el('dt', {}, 'State'), el('dd', { id: 'job-state' }, stateEl(a.state), a.reason ? ` — ${a.reason}` : '', a.reason_detail ? ` (${a.reason_detail})` : ''),
        el('dt', {}, 'Name'), el('dd', {}, r.name || '—'),
        el('dt', {}, 'User / tenant'), el('dd', {}, `${r.user || '—'} / ${r.tenant}`),
        el('dt', {}, 'vCluster'), el('dd', {}, r.vcluster),
        el('dt', {}, 'Nodes'), el('dd', { class: 'mono' }, a.nodes.length ? a.nodes.join(', ') : `${r.nodes_min} requested`),
        el('dt', {}, 'Walltime'), el('dd', {}, fmtDur(num(r.walltime_seconds))),
        el('dt', {}, 'Submitted'), el('dd', {}, fmtTime(a.submit_time_unix_ms)),
        el('dt', {}, 'Started'), el('dd', {}, fmtTime(a.start_time_unix_ms)),
        el('dt', {}, 'Ended'), el('dd', {}, fmtTime(a.end_time_unix_ms)),
        el('dt', {}, 'Elapsed'), el('dd', {}, elapsed ? fmtDur(elapsed) : '—'),
        el('dt', {}, 'Exit code'), el('dd', {}, a.has_exit_code ? String(a.exit_code) : '—'),
        el('dt', {}, 'Actions'), el('dd', {}, allocActions(a))),
      el('h2', {}, 'State history'),
      el('table', { id: 'history' }, el('thead', {}, el('tr', {}, el('th', {}, 'Time'), el('th', {}, 'State'), el('th', {}, 'Reason'))),
        el('tbody', {}, (a.history || []).map((t) => el('tr', {}, el('td', {}, fmtTime(t.time_unix_ms)), el('td', {}, stateEl(t.state)), el('td', {}, t.reason))))),
      (a.steps || []).length ? [el('h2', {}, 'Steps'), el('table', { id: 'steps' },
        el('thead', {}, el('tr', {}, ['Step', 'State', 'Tasks', 'Nodes', 'Command', 'Exit'].map((h) => el('th', {}, h)))),
        el('tbody', {}, a.steps.map((s) => el('tr', {}, el('td', {}, `${a.display_id}.${s.id}`), el('td', {}, stateEl(s.state)), el('td', { class: 'num' }, s.tasks),
          el('td', { class: 'mono' }, (s.nodes || []).join(',')), el('td', { class: 'mono' }, (s.command || []).join(' ')), el('td', {}, s.has_exit_code ? String(s.exit_code) : '—')))))] : []);
    await loadExplain(a);
    if (num(a.dag_id) && num(a.dag_id) !== lastDag) { lastDag = num(a.dag_id); loadDAG(lastDag, num(a.id)); }
  }

  async function loadExplain(a) {
    let x;
    try {
      x = await api(`/allocations/${encodeURIComponent(id)}/explain`);
    } catch (e) {
      explain.replaceChildren(el('h2', {}, 'Why it waits'), el('p', { class: 'muted' }, e.message));
      return;
    }
    const exp = num(x.expected_start_unix_ms);
    let when = 'unknown (no plan places it yet)';
    if (exp) when = `${fmtTime(exp)} (${exp > Date.now() ? 'in ' + fmtDur((exp - Date.now()) / 1000) : 'now'})`;
    if (a.state !== 'PENDING') when = num(a.start_time_unix_ms) ? `started ${fmtTime(a.start_time_unix_ms)}` : when;
    const factors = (x.factors || []).slice().sort((p, q) => p.name.localeCompare(q.name, 'en', { numeric: true }));
    explain.replaceChildren(
      el('h2', {}, a.state === 'PENDING' ? 'Why it waits: the cost function f1–f9' : 'How it was placed: the cost function f1–f9'),
      el('div', { class: 'expected', id: 'expected-start' }, 'Expected start: ', el('b', {}, when)),
      x.message ? el('p', { id: 'explain-message' }, x.message) : null,
      el('p', { class: 'muted' }, `score ${Number(x.score || 0).toFixed(3)}`, x.queue_position ? ` · queue position ${x.queue_position}` : '',
        x.weights_profile ? ` · weights ${x.weights_profile}` : '', num(x.computed_unix_ms) ? ` · computed ${fmtTime(x.computed_unix_ms)}` : ''),
      el('table', { id: 'explain' },
        el('thead', {}, el('tr', {}, ['Factor', 'What', 'Value', 'Weight', 'Contribution'].map((h) => el('th', { scope: 'col', class: h === 'Factor' || h === 'What' ? '' : 'num' }, h)))),
        el('tbody', {}, factors.map((f) => {
          const bar = el('span'); bar.style.width = `${Math.round(100 * Math.min(1, Math.max(0, f.value)))}%`;
          return el('tr', { 'data-factor': f.name }, el('td', {}, el('b', {}, f.name)), el('td', {}, f.title),
            el('td', { class: 'num' }, Number(f.value).toFixed(3), el('div', { class: 'bar', 'aria-hidden': 'true' }, bar)),
            el('td', { class: 'num' }, Number(f.weight).toFixed(2)), el('td', { class: 'num' }, Number(f.contribution).toFixed(3)));
        }))),
      (x.filtered || []).length ? el('p', { class: 'muted' }, 'Nodes filtered out: ', x.filtered.map((f) => `${f.filter} ${f.removed}`).join(', ')) : null);
  }

  async function loadDAG(dagID, current) {
    let d;
    try { d = await api(`/dags/${dagID}`); } catch (e) { dag.replaceChildren(el('p', { class: 'muted' }, e.message)); return; }
    dag.replaceChildren(el('h2', {}, `Workflow ${d.name || dagID}: `, stateEl(d.state)), dagGraph(d, current));
  }

  // Logs follow while the allocation runs: the stream stays open and each
  // chunk is appended as it comes.
  let follow = null;
  function showLogs(stream) {
    if (follow) follow.abort();
    follow = new AbortController();
    const pre = el('pre', { class: 'log', id: 'log', 'aria-live': 'off' });
    const tabs = el('div', { class: 'tabs', role: 'group', 'aria-label': 'output stream' },
      ['stdout', 'stderr'].map((s) => el('button', { type: 'button', 'aria-pressed': String(s === stream), onclick: () => showLogs(s) }, s)));
    logs.replaceChildren(el('h2', {}, 'Output'), tabs, pre);
    readLog(stream, pre, follow.signal).catch((e) => { if (!follow.signal.aborted) pre.append(`\n[${e.message}]`); });
  }
  async function readLog(stream, pre, signal) {
    const q = `follow=true${stream === 'stderr' ? '&stderr=true' : ''}`;
    const r = await fetch(`/api/v1/allocations/${encodeURIComponent(id)}/logs?${q}`, { credentials: 'same-origin', signal });
    if (!r.ok) { pre.textContent = `[${(await r.json().catch(() => ({}))).message || r.statusText}]`; return; }
    const reader = r.body.getReader();
    const dec = new TextDecoder();
    const utf8 = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl); buf = buf.slice(nl + 1);
        if (!line.trim()) continue;
        const msg = JSON.parse(line);
        if (msg.error) { pre.append(`\n[${msg.error.message}]`); continue; }
        const chunk = msg.result || {};
        if (chunk.data) {
          const bytes = Uint8Array.from(atob(chunk.data), (c) => c.charCodeAt(0));
          const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
          pre.append(utf8.decode(bytes, { stream: true }));
          if (atEnd) pre.scrollTop = pre.scrollHeight;
        }
        if (chunk.eof) pre.append(el('span', { class: 'muted' }, '\n[end of output]'));
      }
    }
  }

  load().then(() => { if (!stopped) showLogs('stdout'); });
  const timer = setInterval(load, 5000);
  return () => { stopped = true; clearInterval(timer); if (follow) follow.abort(); };
}

// dagGraph lays the stages out in columns by depth, edges left to right.
function dagGraph(d, current) {
  const stages = d.allocations || [];
  const byName = new Map(stages.map((s) => [s.name, s]));
  const depth = new Map();
  const depthOf = (s, seen = new Set()) => {
    if (depth.has(s.name)) return depth.get(s.name);
    if (seen.has(s.name)) return 0;
    seen.add(s.name);
    let dd = 0;
    for (const dep of s.depends_on || []) { const p = byName.get(dep.name); if (p && p !== s) dd = Math.max(dd, depthOf(p, seen) + 1); }
    depth.set(s.name, dd);
    return dd;
  };
  stages.forEach((s) => depthOf(s));
  const cols = [];
  stages.forEach((s) => { const c = depth.get(s.name); (cols[c] = cols[c] || []).push(s); });
  const W = 170, H = 46, GX = 60, GY = 18;
  const pos = new Map();
  cols.forEach((col, i) => col.forEach((s, j) => pos.set(s.name, { x: 10 + i * (W + GX), y: 10 + j * (H + GY) })));
  const width = 20 + cols.length * (W + GX), height = 20 + Math.max(1, ...cols.map((c) => c.length)) * (H + GY);
  const g = svg('svg', { id: 'dag', viewBox: `0 0 ${width} ${height}`, width, height, role: 'img', 'aria-label': `workflow graph of ${stages.length} stages` },
    svg('defs', {}, svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: '10', refY: '5', markerWidth: '7', markerHeight: '7', orient: 'auto' }, svg('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#8c959f' }))));
  for (const s of stages) {
    for (const dep of s.depends_on || []) {
      const a = pos.get(dep.name), b = pos.get(s.name);
      if (!a || !b || a === b) continue;
      g.append(svg('path', { class: 'dag-edge', d: `M${a.x + W},${a.y + H / 2} C${a.x + W + GX / 2},${a.y + H / 2} ${b.x - GX / 2},${b.y + H / 2} ${b.x},${b.y + H / 2}` }),
        svg('text', { x: (a.x + W + b.x) / 2, y: (a.y + b.y) / 2 + H / 2 - 4, 'text-anchor': 'middle', fill: '#57606a' }, dep.condition || ''));
    }
  }
  for (const s of stages) {
    const p = pos.get(s.name);
    const link = svg('a', { href: `#/job/${s.display_id}` },
      svg('g', { class: 'dag-node' + (num(s.id) === current ? ' current' : ''), 'data-stage': s.name },
        svg('rect', { x: p.x, y: p.y, width: W, height: H }),
        svg('text', { x: p.x + 8, y: p.y + 18, 'font-weight': '600' }, `${s.name} (${s.display_id})`),
        svg('text', { x: p.x + 8, y: p.y + 36 }, `${s.state}${s.tasks > 1 ? ` ${s.tasks_completed}/${s.tasks}` : ''}`)));
    g.append(link);
  }
  return g;
}

// nodes: grouped by dragonfly group, then by the vCluster using them; each
// says its state and why, and whether it is borrowed from its home.
function pageNodes(main) {
  const summary = el('div', { class: 'summary' });
  const panel = el('form', { class: 'filters', id: 'node-admin', onsubmit: (e) => e.preventDefault() });
  const groups = el('div');
  main.append(el('h1', {}, 'Nodes'), summary, isAdmin() ? panel : null, groups);
  const sel = { name: '' };
  if (isAdmin()) {
    const name = el('input', { id: 'drain-node', name: 'node', placeholder: 'node name', required: true });
    const reason = el('input', { id: 'drain-reason', name: 'reason', placeholder: 'reason (shown to users)' });
    const act = (verb) => async () => {
      const n = name.value.trim();
      if (!n) throw new Error('name a node (click one below)');
      await api(`/nodes/${encodeURIComponent(n)}/${verb}`, { method: 'POST', body: verb === 'drain' ? { reason: reason.value || 'drained from the dashboard' } : {} });
      say(`${verb}: ${n} done`);
      await refresh();
    };
    panel.append(el('label', { for: 'drain-node' }, 'Node', name), el('label', { for: 'drain-reason' }, 'Reason', reason),
      actionButton('Drain', act('drain')), actionButton('Undrain', act('undrain')));
    sel.input = name;
  }
  async function refresh() {
    try {
      const r = await api('/nodes');
      for (const n of r.nodes) store.nodes.set(n.name, n);
      draw();
    } catch (e) { say(e.message, true); }
  }
  function why(n) {
    const bits = [];
    if (n.state_reason) bits.push(n.state_reason);
    if (n.borrowed) bits.push(`lent by ${n.home_vcluster}`);
    if (n.return_requested) bits.push('returns home when its job ends');
    if (num(n.allocation)) bits.push(`runs ${n.allocation_display_id || n.allocation}`);
    if (num(n.reserved_for)) bits.push(`reserved for ${n.reserved_for}`);
    return bits.join('; ');
  }
  function draw() {
    const nodes = [...store.nodes.values()].sort((a, b) => a.name.localeCompare(b.name, 'en', { numeric: true }));
    const count = (f) => nodes.filter(f).length;
    summary.replaceChildren(
      ...[['Nodes', nodes.length], ['Busy', count((n) => num(n.allocation))], ['Borrowed', count((n) => n.borrowed)],
        ['Drained', count((n) => n.state === 'Drained' || n.state === 'Draining')], ['Down', count((n) => n.state === 'Down')],
        ['Degraded', count((n) => n.state === 'Degraded')]].map(([k, v]) => el('div', { class: 'tile', 'data-count': k.toLowerCase() }, el('b', {}, v), k)));
    const byGroup = new Map();
    for (const n of nodes) {
      if (!byGroup.has(n.group)) byGroup.set(n.group, new Map());
      const vcs = byGroup.get(n.group);
      const vc = n.current_vcluster || n.home_vcluster || '—';
      if (!vcs.has(vc)) vcs.set(vc, []);
      vcs.get(vc).push(n);
    }
    const tile = (n) => {
      const t = el('button', {
        type: 'button', class: `node st-${n.state}${n.borrowed ? ' is-borrowed' : ''}${sel.name === n.name ? ' selected' : ''}`,
        'data-node': n.name, title: why(n) || n.state,
      }, el('span', { class: 'name' }, n.name), ' ', stateEl(n.state), el('br'),
      n.borrowed ? el('span', { class: 'badge borrowed' }, `borrowed from ${n.home_vcluster}`) : null,
      num(n.allocation) ? el('span', { class: 'badge busy' }, `busy ${n.allocation_display_id || n.allocation}`) : null,
      el('span', { class: 'why' }, n.state_reason || (num(n.allocation) ? '' : 'idle')));
      t.addEventListener('click', () => { sel.name = n.name; if (sel.input) sel.input.value = n.name; draw(); });
      return t;
    };
    const vcBlock = ([vc, ns]) => el('div', { class: 'vc', 'data-vcluster': vc },
      el('h3', {}, `vCluster ${vc} — ${ns.length} node(s)`), el('div', { class: 'nodes' }, ns.map(tile)));
    const groupBlock = (g) => el('section', { class: 'group', 'data-group': String(g) },
      el('h2', {}, `Dragonfly group ${g}`), [...byGroup.get(g).entries()].sort().map(vcBlock));
    groups.replaceChildren(...[...byGroup.keys()].sort((a, b) => a - b).map(groupBlock));
  }
  refresh();
  const timer = setInterval(refresh, 10000);
  const off = onStore(draw);
  return () => { clearInterval(timer); off(); };
}

// power: the budget against the draw over time: the member's history (a
// sample every 10 s, a day kept), then a sample every 5 s while the page is
// open.
function pagePower(main) {
  let samples = [];
  const now = el('div', { class: 'summary' }), chart = el('div'), table = el('div');
  main.append(el('h1', {}, 'Power'), now,
    el('div', { class: 'legend', 'aria-label': 'legend' }, el('span', { class: 'budget' }, 'budget (dashed)'), el('span', { class: 'counted' }, 'counted draw (solid)'),
      el('span', { class: 'measured' }, 'measured draw (dotted)'), el('span', { class: 'estimated' }, 'configured estimate')),
    chart, table);
  const history = api('/power/history').then((h) => {
    samples = (h.samples || []).map((p) => ({ t: num(p.time_unix_ms), budget: num(p.budget_watts), counted: num(p.counted_watts), measured: num(p.measured_watts), estimated: num(p.estimated_watts) }));
  }).catch((e) => say(`power history: ${e.message}`, true));
  async function sample() {
    let p;
    try { p = await api('/power'); } catch (e) { say(e.message, true); return; }
    await history;
    samples.push({ t: Date.now(), budget: num(p.budget_watts), counted: num(p.counted_watts), measured: num(p.measured_watts), estimated: num(p.estimated_watts) });
    samples = samples.filter((s) => s.t > Date.now() - 24 * 3600e3).slice(-20000);
    now.replaceChildren(...[['Budget', num(p.budget_watts) ? watts(p.budget_watts) : 'none set'], ['Counted draw', watts(p.counted_watts)],
      ['Measured', `${watts(p.measured_watts)} on ${p.measured_nodes} node(s)`], ['Configured estimate', watts(p.estimated_watts)]]
      .map(([k, v]) => el('div', { class: 'tile' }, el('b', {}, v), k)));
    chart.replaceChildren(powerChart(samples));
    table.replaceChildren(el('h2', {}, 'By vCluster'), el('table', { id: 'power-vclusters' },
      el('thead', {}, el('tr', {}, ['vCluster', 'Budget', 'Counted', 'Measured', 'Estimate'].map((h) => el('th', { class: h === 'vCluster' ? '' : 'num' }, h)))),
      el('tbody', {}, (p.vclusters || []).map((v) => el('tr', {}, el('td', {}, v.vcluster), el('td', { class: 'num' }, num(v.budget_watts) ? watts(v.budget_watts) : 'none'),
        el('td', { class: 'num' }, watts(v.counted_watts)), el('td', { class: 'num' }, `${watts(v.measured_watts)} (${v.measured_nodes} nodes)`), el('td', { class: 'num' }, watts(v.estimated_watts)))))));
  }
  sample();
  const timer = setInterval(sample, 5000);
  return () => clearInterval(timer);
}

function powerChart(samples) {
  const W = 900, H = 260, L = 70, B = 30, T = 10, R = 10;
  if (samples.length < 1) return el('p', { class: 'muted' }, 'No samples yet.');
  const t0 = samples[0].t, t1 = Math.max(samples[samples.length - 1].t, t0 + 60e3);
  const top = Math.max(1, ...samples.map((s) => Math.max(s.budget, s.counted, s.measured, s.estimated))) * 1.1;
  const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
  const y = (w) => T + (1 - w / top) * (H - T - B);
  const g = svg('svg', { id: 'power-chart', viewBox: `0 0 ${W} ${H}`, width: '100%', height: H, role: 'img', 'aria-label': 'power budget and draw over time' });
  for (let i = 0; i <= 4; i++) {
    const w = (top / 4) * i;
    g.append(svg('line', { class: 'grid', x1: L, x2: W - R, y1: y(w), y2: y(w) }), svg('text', { x: L - 6, y: y(w) + 4, 'text-anchor': 'end' }, watts(Math.round(w))));
  }
  g.append(svg('line', { class: 'axis', x1: L, x2: L, y1: T, y2: H - B }), svg('line', { class: 'axis', x1: L, x2: W - R, y1: H - B, y2: H - B }),
    svg('text', { x: L, y: H - 8 }, fmtTime(t0)), svg('text', { x: W - R, y: H - 8, 'text-anchor': 'end' }, fmtTime(t1)));
  const line = (k, cls) => {
    const pts = samples.filter((s) => k !== 'budget' || s.budget > 0).map((s) => `${x(s.t).toFixed(1)},${y(s[k]).toFixed(1)}`);
    if (pts.length === 1) pts.push(pts[0].replace(/^[^,]+/, String(W - R)));
    if (pts.length) g.append(svg('polyline', { class: cls, points: pts.join(' ') }));
  };
  line('estimated', 'l-estimated'); line('counted', 'l-counted'); line('measured', 'l-measured'); line('budget', 'l-budget');
  return g;
}

// history: ended allocations with a search over id, name, user, tenant,
// vCluster and reason.
function pageHistory(main) {
  const values = { q: '', state: '' };
  const out = el('div');
  const bar = filterBar([{ name: 'q', label: 'Search', placeholder: 'id, name, user, tenant, reason' }, { name: 'state', label: 'State', options: ENDED }], values, draw);
  main.append(el('h1', {}, 'History'), bar, out);
  let all = [];
  async function load() {
    try {
      all = [];
      let token = '';
      for (let i = 0; i < 20; i++) {
        const r = await api(`/history?states=COMPLETED&states=FAILED&states=CANCELLED&page_size=1000${token ? '&page_token=' + encodeURIComponent(token) : ''}`);
        all.push(...r.allocations);
        token = r.next_page_token;
        if (!token) break;
      }
      draw();
    } catch (e) { out.replaceChildren(el('p', { class: 'error' }, e.message)); }
  }
  function draw() {
    const q = values.q.toLowerCase();
    const rows = all.filter((a) => (!values.state || a.state === values.state) && (!q || [a.display_id, a.request.name, a.request.user, a.request.tenant, a.request.vcluster, a.reason]
      .some((f) => (f || '').toLowerCase().includes(q)))).sort((a, b) => num(b.end_time_unix_ms) - num(a.end_time_unix_ms));
    out.replaceChildren(el('p', { class: 'muted' }, `${rows.length} of ${all.length} ended allocation(s)`), el('table', { id: 'history-table' },
      el('thead', {}, el('tr', {}, ['ID', 'Name', 'User', 'Tenant', 'vCluster', 'State', 'Exit', 'Elapsed', 'Ended', 'Reason'].map((h) => el('th', {}, h)))),
      el('tbody', {}, rows.slice(0, 1000).map((a) => el('tr', { 'data-id': a.display_id },
        el('td', {}, el('a', { href: `#/job/${a.display_id}` }, a.display_id)), el('td', {}, a.request.name), el('td', {}, a.request.user || '—'),
        el('td', {}, a.request.tenant), el('td', {}, a.request.vcluster), el('td', {}, stateEl(a.state)), el('td', {}, a.has_exit_code ? String(a.exit_code) : '—'),
        el('td', { class: 'num' }, num(a.start_time_unix_ms) ? fmtDur((num(a.end_time_unix_ms) - num(a.start_time_unix_ms)) / 1000) : '—'),
        el('td', {}, fmtTime(a.end_time_unix_ms)), el('td', {}, a.reason || ''))))));
  }
  load();
  return () => {};
}

// tenants: quotas and fair share, the usage share against the target.
function pageTenants(main) {
  const out = el('div');
  main.append(el('h1', {}, 'Tenants and fair share'), out);
  (async () => {
    let r;
    try { r = await api('/tenants'); } catch (e) { out.replaceChildren(el('p', { class: 'error' }, e.message)); return; }
    out.replaceChildren(el('p', { class: 'muted' }, 'The bar is the tenant’s share of recent usage; the black mark is its fair-share target.'),
      el('table', { id: 'tenants' },
        el('thead', {}, el('tr', {}, ['Tenant', 'Usage share vs target', 'Usage (node-hours)', 'Running', 'Nodes in use', 'Max nodes', 'Max running'].map((h) => el('th', {}, h)))),
        el('tbody', {}, r.tenants.map((t) => {
          const share = Number(t.usage_share || 0), target = Number(t.fair_share_target || 0);
          const fill = el('span'); fill.style.width = `${Math.round(100 * Math.min(1, share))}%`;
          const mark = el('i'); mark.style.left = `${Math.round(100 * Math.min(1, target))}%`;
          return el('tr', { 'data-tenant': t.name }, el('td', {}, el('b', {}, t.name)),
            el('td', {}, `${(100 * share).toFixed(1)}% of use, target ${target ? (100 * target).toFixed(1) + '%' : 'none'}`, el('div', { class: 'bar target', 'aria-hidden': 'true' }, fill, target ? mark : null)),
            el('td', { class: 'num' }, (Number(t.usage_node_seconds || 0) / 3600).toFixed(1)), el('td', { class: 'num' }, t.running_allocations),
            el('td', { class: 'num' }, t.running_nodes), el('td', { class: 'num' }, t.max_nodes || '—'), el('td', { class: 'num' }, t.max_running || '—'));
        }))));
  })();
  return () => {};
}

// dags: the workflows, each opening as a graph.
function pageDAGs(main, id) {
  const out = el('div');
  main.append(el('h1', {}, id ? `Workflow ${id}` : 'Workflows'), out);
  (async () => {
    try {
      if (id) {
        const d = await api(`/dags/${encodeURIComponent(id)}`);
        out.replaceChildren(el('p', {}, stateEl(d.state), ` ${d.name} · ${d.stages_completed}/${d.stages} stages completed`), dagGraph(d, 0));
        return;
      }
      const r = await api('/dags');
      out.replaceChildren(el('table', { id: 'dags' }, el('thead', {}, el('tr', {}, ['ID', 'Name', 'Tenant', 'State', 'Stages', 'Submitted'].map((h) => el('th', {}, h)))),
        el('tbody', {}, (r.dags || []).map((d) => el('tr', {}, el('td', {}, el('a', { href: `#/dags/${d.dag_id}` }, d.dag_id)), el('td', {}, d.name), el('td', {}, d.tenant),
          el('td', {}, stateEl(d.state)), el('td', {}, `${d.stages_completed}/${d.stages} done, ${d.stages_active} active, ${d.stages_failed} failed`), el('td', {}, fmtTime(d.submit_time_unix_ms)))))));
    } catch (e) { out.replaceChildren(el('p', { class: 'error' }, e.message)); }
  })();
  return () => {};
}

// ---- routing -------------------------------------------------------------

let leave = () => {};
function route() {
  leave();
  const parts = (location.hash.replace(/^#\/?/, '') || 'queue').split('/');
  const page = parts[0], arg = decodeURIComponent(parts.slice(1).join('/'));
  document.querySelectorAll('header nav a').forEach((a) => a.toggleAttribute('aria-current', false));
  const nav = document.querySelector(`header nav a[data-page="${page === 'job' ? 'queue' : page}"]`);
  if (nav) nav.setAttribute('aria-current', 'page');
  const main = document.getElementById('main');
  main.replaceChildren();
  const pages = { queue: pageQueue, job: pageJob, nodes: pageNodes, power: pagePower, history: pageHistory, tenants: pageTenants, dags: pageDAGs };
  const fn = pages[page] || pageQueue;
  document.title = `Lattice — ${page === 'job' ? 'allocation ' + arg : page}`;
  leave = fn(main, arg) || (() => {});
}

async function start() {
  try {
    me = await api('/whoami');
  } catch (e) {
    document.getElementById('main').replaceChildren(el('p', { class: 'error' }, e.message));
    return;
  }
  me.tenants = me.tenants || [];
  document.getElementById('whoami').textContent = me.auth_enabled ? `${me.user} (${me.role}${me.tenants.length ? ', ' + me.tenants.join(', ') : ''})` : 'authentication off';
  if (!me.auth_enabled) document.getElementById('logout').hidden = true;
  startEvents();
  window.addEventListener('hashchange', route);
  route();
}

start();
