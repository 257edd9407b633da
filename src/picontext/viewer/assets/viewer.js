/* picontext session viewer. Session text is hostile: it only ever reaches the page through
   textContent / createTextNode / setAttribute on attributes that cannot run code; never innerHTML. */
(function () {
  'use strict';
  var ROW = 22;
  var D = null;          // meta (see viewer/model.py)
  var LINES = null;      // one JSON line per entry, parsed on demand; null until inflated
  var linesReady = null; // promise of LINES
  var parsed = new Map();
  var lowered = null;    // lowercased lines, built on the first search
  var S = { filter: 'default', query: '', selected: null, tab: 'context', rows: [] };
  var idIndex = null, labelOf = null, onBranch = null, stateOf = null, compactionAt = null;
  var WHY = ['compacted', 'omitted', 'replaced'];  // dropped rows are [entry, why, by entry or -1, chars]

  function $(id) { return document.getElementById(id); }
  function el(tag, cls, text) {
    var n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined && text !== null) n.textContent = str(text);
    return n;
  }
  // Text of any value from the file: JSON for an object (String() of {"toString": 1} would throw).
  function str(v) {
    if (typeof v === 'string') return v;
    if (v === null || typeof v !== 'object') return String(v);
    try { return JSON.stringify(v); } catch (e) { return '?'; }
  }
  function add(parent) { for (var i = 1; i < arguments.length; i++) if (arguments[i]) parent.appendChild(arguments[i]); return parent; }
  // Numbers read from the file may be anything (a string, an object): only a number is shown as one.
  function fmt(n) { return typeof n !== 'number' || n !== n ? '–' : Math.round(n).toLocaleString('en-US'); }
  function money(n) { return typeof n === 'number' && n ? '$' + n.toFixed(4) : '–'; }
  function arr(v) { return Array.isArray(v) ? v : []; }
  function entry(i) {
    if (!parsed.has(i)) { var v; try { v = JSON.parse(LINES[i]); } catch (e) { v = null; } parsed.set(i, v); }
    return parsed.get(i);
  }
  function kindOf(i) {
    if (D.kinds[i] === 'custom' && D.roles[i] === 'compactionFailed') return 'compaction_failed';
    return D.kinds[i] === 'message' ? (D.roles[i] || 'message') : D.kinds[i];
  }

  // ---------------------------------------------------------------- data
  // base64(gzip(utf-8)) -> text, with the browser's own inflater.
  function unpack(b64) {
    var bytes;
    if (Uint8Array.fromBase64) bytes = Uint8Array.fromBase64(b64.trim());
    else { var bin = atob(b64.trim()); bytes = new Uint8Array(bin.length); for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i); }
    return new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'))).text();
  }
  function withLines(fn) { if (LINES) fn(); else linesReady.then(fn); }
  function load(meta, packedLines) {
    D = meta; LINES = null; parsed = new Map(); lowered = null;
    linesReady = new Promise(function (ok) { setTimeout(ok, 0); }).then(function () { return unpack(packedLines); }).then(function (text) {
      if (D !== meta) return LINES;
      LINES = text.split('\n'); document.body.dataset.lines = String(LINES.length); return LINES;
    });
    idIndex = new Map(); labelOf = new Map(); onBranch = new Uint8Array(D.ids.length); stateOf = new Map(); compactionAt = new Map();
    for (var i = 0; i < D.ids.length; i++) if (!idIndex.has(D.ids[i])) idIndex.set(D.ids[i], i);
    D.labels.forEach(function (l) { labelOf.set(l[0], l[1]); });
    D.branch.forEach(function (i) { onBranch[i] = 1; });
    // Expand the compact columns (see viewer/model.py).
    ['kinds', 'roles'].forEach(function (k) {
      var col = D[k]; if (!col || !col.codes) return;
      var out = new Array(col.codes.length); for (var j = 0; j < out.length; j++) out[j] = col.names[col.codes[j]]; D[k] = out;
    });
    D.dropped.forEach(function (d) { if (d[0] >= 0) stateOf.set(d[0], d); });
    D.compactions.forEach(function (c, k) { compactionAt.set(c.index, k); });
  }

  // ---------------------------------------------------------------- header
  function renderHeader() {
    var h = D.header || {};
    $('title').textContent = D.name || (D.file || 'session');
    document.title = (D.name || D.file || 'session') + ' · picontext';
    var f = $('facts'); f.textContent = '';
    [['id', h.id], ['cwd', h.cwd], ['created', h.timestamp], ['version', h.version], ['entries', fmt(D.ids.length)],
     ['branch', fmt(D.branch.length)], ['compactions', D.compactions.length],
     ['leaf', D.leaf === null ? '–' : D.ids[D.leaf]]].forEach(function (kv) {
      if (kv[1] === undefined || kv[1] === null) return;
      var s = el('span', null, kv[0] + ' '); add(s, el('b', null, kv[1])); f.appendChild(s);
    });
    if (h.parentSession) { var s = el('span', null, 'parent '); add(s, el('b', null, h.parentSession)); f.appendChild(s); }
  }

  // ---------------------------------------------------------------- tree
  var SETTINGS_KINDS = { label: 1, custom: 1, context_edit: 1, model_change: 1, thinking_level_change: 1 };
  function passes(i) {
    if (i === D.leaf) return true;
    var kind = D.kinds[i], role = D.roles[i], filter = S.filter;
    if (kind === 'custom' && role === 'compactionFailed') kind = 'compaction_failed';  // shown with the conversation
    // Pi hides assistant turns made of tool calls only (unless they failed); "all" shows them.
    if (filter !== 'all' && (D.flags[i] & 3) === 1) return false;
    var ok;
    if (filter === 'user-only') ok = kind === 'message' && role === 'user';
    else if (filter === 'no-tools') ok = !SETTINGS_KINDS[kind] && !(kind === 'message' && role === 'toolResult');
    else if (filter === 'labeled-only') ok = labelOf.has(i);
    else if (filter === 'all') ok = true;
    else ok = !SETTINGS_KINDS[kind];
    if (!ok) return false;
    if (S.tokens.length) {
      if (!lowered) lowered = new Array(LINES.length);
      var text = lowered[i];
      if (text === undefined) text = lowered[i] = (LINES[i] + ' ' + D.previews[i] + ' ' + (labelOf.get(i) || '')).toLowerCase();
      for (var t = 0; t < S.tokens.length; t++) if (text.indexOf(S.tokens[t]) < 0) return false;
    }
    return true;
  }
  function refilter() {
    S.tokens = S.query.toLowerCase().split(/\s+/).filter(Boolean);
    if (S.tokens.length && !LINES) { $('count').textContent = 'reading entries…'; withLines(refilter); return; }
    var rows = [];
    for (var k = 0; k < D.order.length; k++) if (passes(D.order[k])) rows.push(k);
    S.rows = rows;
    var tree = $('tree');
    tree.dataset.count = String(rows.length);
    $('count').textContent = fmt(rows.length) + ' of ' + fmt(D.ids.length) + ' entries shown';
    $('tree-spacer').style.height = (rows.length * ROW) + 'px';
    paintTree(true);
  }
  var painted = { from: -1, to: -1 };
  function paintTree(force) {
    var tree = $('tree'), spacer = $('tree-spacer');
    var from = Math.max(0, Math.floor(tree.scrollTop / ROW) - 15);
    var to = Math.min(S.rows.length, Math.ceil((tree.scrollTop + tree.clientHeight) / ROW) + 15);
    if (!force && from === painted.from && to === painted.to) return;
    painted = { from: from, to: to };
    spacer.textContent = '';
    var frag = document.createDocumentFragment();
    for (var r = from; r < to; r++) frag.appendChild(treeRow(S.rows[r], r));
    spacer.appendChild(frag);
  }
  function treeRow(k, r) {
    var i = D.order[k], kind = kindOf(i);
    var row = el('div', 'row');
    row.style.top = (r * ROW) + 'px';
    row.dataset.index = String(i);
    row.dataset.id = D.ids[i];
    row.dataset.kind = kind;
    if (!onBranch[i]) row.classList.add('off-branch');
    var st = stateOf.get(i);
    if (st) row.classList.add(WHY[st[1]]);
    if (i === S.selected) row.classList.add('sel');
    if (D.prefix[k]) add(row, el('span', 'pre', D.prefix[k]));
    var known = { user: 1, assistant: 1, toolResult: 1, bashExecution: 1, compaction: 1, branch_summary: 1, context_edit: 1,
                  compaction_failed: 1 };
    add(row, el('span', 'who ' + (known[kind] ? 'k-' + kind : 'k-other'), kind));
    if (i === D.leaf) add(row, el('span', 'badge leaf', 'leaf'));
    if (labelOf.has(i)) add(row, el('span', 'badge label', labelOf.get(i)));
    if (st) add(row, el('span', 'badge state', WHY[st[1]]));
    add(row, el('span', 'txt', ' ' + D.previews[i]));
    return row;
  }
  function revealInTree(i) {
    var k = D.order.indexOf(i);
    var r = S.rows.indexOf(k);
    if (r < 0) { S.filter = 'all'; S.query = ''; $('search').value = ''; markFilter(); refilter(); r = S.rows.indexOf(k); }
    var tree = $('tree');
    if (r >= 0 && (r * ROW < tree.scrollTop || (r + 1) * ROW > tree.scrollTop + tree.clientHeight)) tree.scrollTop = Math.max(0, r * ROW - tree.clientHeight / 3);
    paintTree(true);
  }
  function markFilter() {
    Array.prototype.forEach.call(document.querySelectorAll('#filters button'), function (b) { b.classList.toggle('on', b.dataset.filter === S.filter); });
  }

  // ---------------------------------------------------------------- markdown (DOM only)
  // Whatever an entry holds (CRLF or CR line ends, U+2028/2029, runs of thousands of backticks,
  // brackets or stars), rendering ends, in time linear in its length: every loop moves its index
  // forward on every pass, and no text is searched again from a place already searched.
  var MD_DEPTH = 8;  // block quotes nested deeper than this are shown as text
  function inline(parent, text) {
    // Code spans (a run of N backticks up to the next run of exactly N), **strong**, *em* and
    // [links](https://...). `__x__` is left alone: names like __init__.py are far more common in
    // sessions than that bold.
    var n = text.length, i = 0, last = 0, found = {}, space = /\s/g;
    function find(s, from) {  // text.indexOf(s, from) (s = ' ': any white space); an answer still ahead of `from` is reused
      var f = found[s];
      if (!f || from < f[0] || (f[1] >= 0 && f[1] < from)) {
        var at;
        if (s === ' ') { space.lastIndex = from; var w = space.exec(text); at = w ? w.index : -1; } else at = text.indexOf(s, from);
        found[s] = f = [from, at];
      }
      return f[1];
    }
    var runs = [], closer = [], r = 0;  // backtick runs [start, length] and the index of each one's closer
    for (var k = text.indexOf('`'); k >= 0; k = text.indexOf('`', k)) {
      var e = k; while (e < n && text.charCodeAt(e) === 96) e++;
      runs.push([k, e - k]); k = e;
    }
    var nextOfLength = new Map();
    for (var j = runs.length - 1; j >= 0; j--) {
      closer[j] = nextOfLength.has(runs[j][1]) ? nextOfLength.get(runs[j][1]) : -1;
      nextOfLength.set(runs[j][1], j);
    }
    function emit(upto, node) {
      if (upto > last) parent.appendChild(document.createTextNode(text.slice(last, upto)));
      return node ? parent.appendChild(node) : null;
    }
    while (i < n) {
      var c = text.charCodeAt(i), q;
      if (c === 96) {  // `
        while (runs[r][0] < i) r++;
        var run = runs[r], to = closer[r];
        if (to >= 0) { emit(i, el('code', null, text.slice(i + run[1], runs[to][0]))); i = last = runs[to][0] + run[1]; r = to + 1; }
        else { i += run[1]; r++; }  // no closing run of that length: the backticks are text
        continue;
      }
      if (c === 42 && text.charCodeAt(i + 1) === 42) {  // **strong**
        q = find('*', i + 2);
        if (q > i + 2 && text.charCodeAt(q + 1) === 42) { inline(emit(i, el('strong')), text.slice(i + 2, q)); i = last = q + 2; continue; }
      } else if (c === 42 && i + 1 < n && !/\s/.test(text.charAt(i + 1))) {  // *em*
        q = find('*', i + 1);
        if (q > i + 1) { inline(emit(i, el('em')), text.slice(i + 1, q)); i = last = q + 1; continue; }
      } else if (c === 91) {  // [text](url)
        q = find(']', i + 1);
        if (q > i + 1 && text.charCodeAt(q + 1) === 40) {
          var close = find(')', q + 2), blank = find(' ', q + 2);
          if (close > q + 2 && (blank < 0 || blank > close)) {
            var url = text.slice(q + 2, close), label = text.slice(i + 1, q);
            if (/^https?:\/\//i.test(url)) {
              var a = el('a', null, label); a.setAttribute('href', url); a.setAttribute('rel', 'noopener noreferrer nofollow'); a.setAttribute('target', '_blank');
              emit(i, a); last = close + 1;
            }
            i = close + 1; continue;  // another scheme: the whole link stays text
          }
        }
      }
      i++;
    }
    emit(n);
  }
  var FENCE = /^\s*(```+|~~~+)\s*([\w+-]*)/, HEADING = /^(#{1,6})[ \t]+/, RULE = /^\s*([-*_])(\s*\1){2,}\s*$/;
  var QUOTE = /^\s*>/, ITEM = /^(\s*)([-*+]|\d+[.)])\s+/;
  function markdown(text, depth) {
    depth = depth || 0;
    var root = el('div', 'md');
    var lines = str(text).split(/\r\n?|\n/);  // CommonMark's line ends; U+2028/2029 are text
    var i = 0, para = [], m;
    function flush() { if (para.length) { inline(root.appendChild(el('p')), para.join('\n')); para = []; } }
    // Each branch below consumes the line it matched (i grows on every pass).
    while (i < lines.length) {
      var line = lines[i];
      if ((m = FENCE.exec(line))) {
        flush();
        var fence = m[1], body = [];
        for (i++; i < lines.length && lines[i].trim().indexOf(fence) !== 0; i++) body.push(lines[i]);
        i++;  // the closing fence (or past the end)
        var code = el('code', null, body.join('\n'));
        if (m[2]) code.dataset.lang = m[2];
        root.appendChild(add(el('pre'), code));
      } else if ((m = HEADING.exec(line))) {
        flush(); inline(root.appendChild(el('h' + Math.min(6, m[1].length + 2))), line.slice(m[0].length)); i++;
      } else if (RULE.test(line)) {
        flush(); root.appendChild(el('hr')); i++;
      } else if (QUOTE.test(line) && depth < MD_DEPTH) {
        flush(); var quote = [];
        do quote.push(lines[i++].replace(/^\s*>\s?/, '')); while (i < lines.length && QUOTE.test(lines[i]));
        add(root, add(el('blockquote'), markdown(quote.join('\n'), depth + 1)));
      } else if ((m = ITEM.exec(line))) {
        flush();
        var list = el(/\d/.test(m[2]) ? 'ol' : 'ul');
        do {
          var item = lines[i++].slice(m[0].length).replace(/^\[( |x)\]\s/, function (_, x) { return x === 'x' ? '☑ ' : '☐ '; });
          inline(list.appendChild(el('li')), item);
        } while (i < lines.length && (m = ITEM.exec(lines[i])));
        root.appendChild(list);
      } else {
        if (line.trim()) para.push(line); else flush();
        i++;
      }
    }
    flush();
    return root;
  }
  function pre(text, cls) { return el('pre', cls || 'code', text); }
  function pretty(v) { try { return JSON.stringify(v, null, 2); } catch (e) { return str(v); } }

  // ---------------------------------------------------------------- entry view
  function ref(id, text) {
    var i = idIndex.get(id);
    if (i === undefined) return el('span', 'meta-line', text || str(id));
    var a = el('a', 'ref', text || str(id));
    a.dataset.goto = String(i);
    return a;
  }
  function renderContent(box, content, role) {
    if (typeof content === 'string') { box.appendChild(role === 'toolResult' ? pre(content) : markdown(content)); return; }
    if (!Array.isArray(content)) return;
    content.forEach(function (b) {
      if (!b || typeof b !== 'object') return;
      if (b.type === 'text') box.appendChild(role === 'toolResult' ? pre(str(b.text || '')) : markdown(str(b.text || '')));
      else if (b.type === 'thinking') {
        var d = el('details', 'thinking'); add(d, el('summary', null, 'thinking (' + fmt(str(b.thinking || '').length) + ' chars)'), markdown(str(b.thinking || '')));
        box.appendChild(d);
      } else if (b.type === 'toolCall') {
        var t = el('div', 'tool'); add(t, el('span', 'name', '→ ' + str(b.name)), el('span', 'meta-line', '  ' + str(b.id || '')), pre(pretty(b.arguments)));
        box.appendChild(t);
      } else if (b.type === 'image') box.appendChild(el('div', 'pill', '[image ' + str(b.mimeType || '') + ']'));
      else box.appendChild(pre(pretty(b)));
    });
  }
  function showEntry(i) {
    if (!LINES) { S.selected = i; $('tab-entry').textContent = 'reading entries…'; setTab('entry'); withLines(function () { showEntry(i); }); return; }
    S.selected = i;
    paintTree(true);
    var e = entry(i), tab = $('tab-entry'), kind = kindOf(i), id = D.ids[i];
    tab.textContent = '';
    tab.dataset.index = String(i);
    var head = el('div', 'entry-head');
    add(head, el('span', 'kind ' + 'k-' + kind, kind), el('span', 'meta-line', id));
    if (e && e.timestamp) add(head, el('span', 'meta-line', e.timestamp));
    if (labelOf.has(i)) add(head, el('span', 'pill', 'label: ' + str(labelOf.get(i))));
    if (i === D.leaf) add(head, el('span', 'pill', 'current leaf'));
    if (!onBranch[i]) add(head, el('span', 'pill', 'not on the shown branch'));
    var st = stateOf.get(i);
    if (st) { var p = el('span', 'pill ' + WHY[st[1]], WHY[st[1]] + (st[2] >= 0 ? ' by ' : '')); if (st[2] >= 0) p.appendChild(ref(D.ids[st[2]])); head.appendChild(p); }
    tab.appendChild(head);
    if (e && e.parentId) add(tab, add(el('div', 'meta-line', 'parent '), ref(e.parentId)));
    var body = el('div', 'block'); tab.appendChild(body);
    if (!e || typeof e !== 'object') { body.appendChild(pre(LINES[i])); }
    else if (e.type === 'message' && e.message && typeof e.message === 'object') {
      var m = e.message;
      if (m.role === 'toolResult') {
        var t = el('div', 'tool' + (m.isError ? ' error' : ''));
        add(t, el('span', 'name', '← ' + str(m.toolName || '?')), el('span', 'meta-line', '  ' + str(m.toolCallId || '') + (m.isError ? '  (error)' : '')));
        renderContent(t, m.content, 'toolResult'); body.appendChild(t);
      } else if (m.role === 'bashExecution') {
        add(body, pre('$ ' + str(m.command || '')), pre(str(m.output || '')));
      } else if (m.role === 'system') {
        if (m.content) renderContent(body, m.content, 'system');
        if (m.sections && typeof m.sections === 'object') Object.keys(m.sections).forEach(function (k) { add(body, el('h3', null, k), markdown(str(m.sections[k]))); });
        if (m.toolsAdded) add(body, el('h3', null, 'tools'), pre(pretty(m.toolsAdded)));
      } else renderContent(body, m.content, m.role);
      if (m.role === 'assistant') {
        var u = m.usage && typeof m.usage === 'object' ? m.usage : {};
        add(body, el('div', 'meta-line', str(m.provider || '?') + '/' + str(m.model || '?') + ' · stop ' + str(m.stopReason || '?') +
          ' · input ' + fmt(u.input) + ' · output ' + fmt(u.output) + ' · cache read ' + fmt(u.cacheRead) + ' · total ' + fmt(u.totalTokens) +
          (u.cost && u.cost.total ? ' · ' + money(u.cost.total) : '')));
        if (m.errorMessage) add(body, el('div', 'pill error', m.errorMessage));
      }
    } else if (e.type === 'custom_message') {
      add(body, el('div', 'meta-line', 'custom message [' + str(e.customType) + ']')); renderContent(body, e.content, 'custom');
    } else if (e.type === 'compaction') {
      var k = compactionAt.get(i);
      add(body, el('div', 'meta-line', 'tokens before ' + fmt(e.tokensBefore) + ' · kept from '), null);
      body.lastChild.appendChild(ref(e.firstKeptEntryId));
      if (k !== undefined) { var a = el('a', 'ref', 'what it summarized →'); a.dataset.compaction = String(k); add(body, a); }
      body.appendChild(markdown(str(e.summary || '')));
    } else if (e.type === 'branch_summary') {
      add(body, add(el('div', 'meta-line', 'summary of the branch left at '), ref(e.fromId)), markdown(str(e.summary || '')));
    } else if (e.type === 'context_edit') {
      add(body, add(el('div', 'meta-line', (e.replacement === null ? 'omits ' : 'replaces the content of ')), ref(e.targetId)));
      if (e.replacement !== null) body.appendChild(pre(pretty(e.replacement)));
    } else body.appendChild(pre(pretty(e)));
    var raw = el('details', 'raw'); add(raw, el('summary', null, 'raw JSON'), pre(pretty(e))); tab.appendChild(raw);
    setTab('entry');
  }

  // ---------------------------------------------------------------- plot
  var SVGNS = 'http://www.w3.org/2000/svg';
  function sv(tag, attrs, parent) {
    var n = document.createElementNS(SVGNS, tag);
    for (var k in attrs) n.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(n);
    return n;
  }
  function renderPlot() {
    var tab = $('tab-context'); tab.textContent = '';
    var reqs = D.plot.requests, comps = D.plot.compactions, st = D.plot.settings || {};
    add(tab, el('h2', null, 'Context over time'), el('div', 'meta-line',
      fmt(reqs.length) + ' requests on this branch · compaction ' + (st.enabled ? 'on, reserve ' + fmt(st.reserveTokens) + ' tokens' : 'off')));
    if (!reqs.length) { tab.appendChild(el('p', 'hint', 'No model requests on this branch.')); return; }
    var W = 1000, H = 340, L = 64, R = 14, T = 12, B = 30;
    var n = reqs.length, maxY = 1, maxWin = 0;
    reqs.forEach(function (r) { maxY = Math.max(maxY, r[1] || 0, r[2] || 0); maxWin = Math.max(maxWin, r[3] || 0); });
    comps.forEach(function (c) { if (typeof c[2] === 'number') maxY = Math.max(maxY, c[2]); });
    // A window far above the data would flatten it: then the lines stay off the scale, and say so.
    var offScale = maxWin > 2.5 * maxY;
    if (!offScale) maxY = Math.max(maxY, maxWin);
    maxY *= 1.06;
    if (offScale) tab.appendChild(el('div', 'meta-line off-scale', 'window ' + fmt(maxWin) + (st.enabled ? ' and threshold ' + fmt(maxWin - st.reserveTokens) : '') + ' tokens are above this scale'));
    function X(k) { return L + (n === 1 ? (W - L - R) / 2 : k * (W - L - R) / (n - 1)); }
    function Y(v) { return T + (H - T - B) * (1 - v / maxY); }
    var wrap = el('div', 'plot-wrap'); tab.appendChild(wrap);
    var svg = sv('svg', { viewBox: '0 0 ' + W + ' ' + H, 'class': 'plot', preserveAspectRatio: 'none', role: 'img' }, wrap);
    svg.dataset.requests = String(n);
    for (var g = 0; g <= 4; g++) {
      var v = maxY / 1.06 * g / 4, y = Y(v);
      sv('line', { x1: L, x2: W - R, y1: y, y2: y, 'class': 'gridl' }, svg);
      var t = sv('text', { x: L - 6, y: y + 4, 'text-anchor': 'end', fill: '#777' }, svg); t.textContent = v >= 1000 ? Math.round(v / 1000) + 'k' : Math.round(v);
    }
    sv('line', { x1: L, x2: L, y1: T, y2: H - B, 'class': 'axis' }, svg);
    sv('line', { x1: L, x2: W - R, y1: H - B, y2: H - B, 'class': 'axis' }, svg);
    var xl = sv('text', { x: (W + L) / 2, y: H - 8, 'text-anchor': 'middle', fill: '#777' }, svg); xl.textContent = 'request # along the branch';
    // Thin the drawn points for long sessions; hover still reads every request.
    var stride = Math.max(1, Math.ceil(n / 2500));
    function series(col, cls, transform) {
      var d = '', pen = false;
      for (var k = 0; k < n; k += stride) {
        var val = transform ? transform(reqs[k]) : reqs[k][col];
        if (val === null || val === undefined || val !== val || val > maxY) { pen = false; continue; }
        d += (pen ? 'L' : 'M') + X(k).toFixed(1) + ' ' + Y(val).toFixed(1);
        pen = true;
      }
      if (d) sv('path', { d: d, 'class': cls }, svg);
    }
    series(3, 'win');
    if (st.enabled) series(0, 'thr', function (r) { return r[3] ? r[3] - st.reserveTokens : null; });
    series(2, 'est');
    series(1, 'rep');
    D.plot.overflows.forEach(function (ei) {
      var k = reqIndexOf(ei); if (k < 0) return;
      var x = X(k), y = Y(reqs[k][2] || 0);
      var o = sv('path', { d: 'M' + (x - 4) + ' ' + (y - 4) + 'L' + (x + 4) + ' ' + (y + 4) + 'M' + (x + 4) + ' ' + (y - 4) + 'L' + (x - 4) + ' ' + (y + 4), 'class': 'mark-overflow' }, svg);
      o.dataset.entry = D.ids[ei];
    });
    comps.forEach(function (c) {
      var x = c[1] <= 0 ? L : c[1] >= n ? W - R : (X(c[1] - 1) + X(c[1])) / 2;
      var gm = sv('g', { 'class': 'mark-compaction' + (c[4] ? ' overflow' : '') }, svg);
      gm.dataset.entry = D.ids[c[0]]; gm.dataset.before = str(c[2]); gm.dataset.after = str(c[3]);
      gm.dataset.x = String(x);
      sv('line', { x1: x, x2: x, y1: T, y2: H - B }, gm);
      sv('path', { d: 'M' + (x - 6) + ' ' + T + 'L' + (x + 6) + ' ' + T + 'L' + x + ' ' + (T + 9) + 'Z' }, gm);
      var title = sv('title', {}, gm);
      title.textContent = (c[4] ? 'overflow recovery ' : 'compaction ') + D.ids[c[0]] + ': ' + fmt(c[2]) + ' → ' + fmt(c[3]) + ' tokens';
    });
    var cursor = sv('line', { x1: 0, x2: 0, y1: T, y2: H - B, 'class': 'cursor', visibility: 'hidden' }, svg);
    var tip = $('tip');
    svg.addEventListener('mousemove', function (ev) {
      var box = svg.getBoundingClientRect(), sx = (ev.clientX - box.left) * W / box.width;
      var k = Math.round((sx - L) * (n - 1) / Math.max(1, W - L - R));
      k = Math.max(0, Math.min(n - 1, n === 1 ? 0 : k));
      var r = reqs[k], lines = [];
      var near = null;
      comps.forEach(function (c) { var cx = c[1] <= 0 ? L : c[1] >= n ? W - R : (X(c[1] - 1) + X(c[1])) / 2; if (Math.abs(cx - sx) < 8 * W / box.width) near = c; });
      if (near) {
        lines.push((near[4] ? 'overflow recovery · ' : 'compaction · ') + D.ids[near[0]]);
        lines.push('tokens before ' + fmt(near[2]) + '  →  after ' + fmt(near[3]) + ' (estimate)');
        cursor.setAttribute('x1', (near[1] <= 0 ? L : near[1] >= n ? W - R : (X(near[1] - 1) + X(near[1])) / 2));
      } else {
        lines.push('request #' + (k + 1) + ' · ' + D.ids[r[0]] + ' · ' + D.plot.models[r[4]]);
        lines.push('reported usage  ' + (r[1] === null ? '– (no usable usage)' : fmt(r[1])));
        lines.push('estimate before ' + fmt(r[2]));
        if (r[3]) lines.push('window ' + fmt(r[3]) + (st.enabled ? ' · threshold ' + fmt(r[3] - st.reserveTokens) : ''));
        cursor.setAttribute('x1', X(k));
      }
      cursor.setAttribute('x2', cursor.getAttribute('x1'));
      cursor.setAttribute('visibility', 'visible');
      tip.textContent = lines.join('\n');
      tip.hidden = false;
      tip.style.left = Math.min(ev.clientX + 14, window.innerWidth - 360) + 'px';
      tip.style.top = (ev.clientY + 14) + 'px';
      svg.dataset.hover = near ? D.ids[near[0]] : D.ids[r[0]];
    });
    svg.addEventListener('mouseleave', function () { tip.hidden = true; cursor.setAttribute('visibility', 'hidden'); });
    svg.addEventListener('click', function () { var i = idIndex.get(svg.dataset.hover); if (i !== undefined) { revealInTree(i); showEntry(i); } });
    var lg = el('div', 'legend');
    [['#2e7d32', 'reported usage (provider)', 'solid'], ['#7a8ca8', 'estimate before the request (chars/4 + anchor)', 'dashed'],
     ['#333', 'context window', 'solid'], ['#e67e22', 'compaction threshold (window − reserve)', 'dashed'],
     ['#8e24aa', 'compaction', 'solid'], ['#c62828', 'overflow / recovery', 'solid']].forEach(function (x) {
      var s = el('span'); var i = el('i'); i.style.borderTopColor = x[0]; i.style.borderTopStyle = x[2]; add(s, i, document.createTextNode(x[1])); lg.appendChild(s);
    });
    tab.appendChild(lg);
    if (comps.length) {
      add(tab, el('h3', null, 'Compactions along the branch'));
      var table = el('table', 'grid plot-compactions'); tab.appendChild(table);
      add(table, add(el('tr'), el('th', null, 'entry'), el('th', null, 'kind'), el('th', 'num', 'after request #'),
        el('th', 'num', 'tokens before'), el('th', 'num', 'after (estimate)')));
      comps.forEach(function (c) {
        add(table, add(el('tr'), add(el('td'), ref(D.ids[c[0]])), el('td', null, c[4] ? 'overflow recovery' : 'compaction'),
          el('td', 'num', fmt(c[1])), el('td', 'num', fmt(c[2])), el('td', 'num', fmt(c[3]))));
      });
    }
  }
  function reqIndexOf(entryIndex) {
    var reqs = D.plot.requests;
    for (var k = 0; k < reqs.length; k++) if (reqs[k][0] === entryIndex) return k;
    return -1;
  }

  // ---------------------------------------------------------------- compactions & dropped
  function entryList(indices, box, limit) {
    var shown = 0;
    function more() {
      var stop = Math.min(indices.length, shown + limit);
      var table = box.querySelector('table') || box.appendChild(el('table', 'grid'));
      for (; shown < stop; shown++) {
        var i = indices[shown], tr = el('tr');
        add(tr, add(el('td'), ref(D.ids[i])), el('td', null, kindOf(i)), el('td', null, D.previews[i]));
        table.appendChild(tr);
      }
      var old = box.querySelector('.more'); if (old) old.remove();
      if (shown < indices.length) {
        var b = el('button', 'more', 'show ' + fmt(Math.min(limit, indices.length - shown)) + ' more of ' + fmt(indices.length - shown));
        b.addEventListener('click', more); box.appendChild(b);
      }
    }
    more();
  }
  function renderCompactions() {
    var tab = $('tab-compactions'); tab.textContent = '';
    add(tab, el('h2', null, 'Compactions on this branch (' + D.compactions.length + ')'));
    if (!D.compactions.length) { tab.appendChild(el('p', 'hint', 'No compaction on this branch.')); return; }
    var overflowAt = new Map(); D.plot.compactions.forEach(function (c) { overflowAt.set(c[0], c); });
    D.compactions.forEach(function (c, k) {
      var pc = overflowAt.get(c.index) || [];
      var card = el('div', 'card compaction' + (pc[4] ? ' overflow' : ''));
      card.id = 'compaction-' + k; card.dataset.entry = D.ids[c.index];
      var h = add(el('h3', null, (pc[4] ? 'Overflow recovery ' : 'Compaction ') + (k + 1) + ' · '), ref(D.ids[c.index]));
      card.appendChild(h);
      var facts = el('div', 'meta-line', 'tokens before ' + fmt(c.tokensBefore) + ' → after ' + fmt(pc[3]) + ' (estimate) · summarized ' + fmt(c.summarized.length) + ' entries · cut point: kept from ');
      facts.appendChild(c.firstKeptIndex !== null ? ref(c.firstKept) : el('span', null, str(c.firstKept) + ' (nothing kept)'));
      card.appendChild(facts);
      if (c.usage) {  // what the summary call cost: cache reads vs writes show whether the prompt cache served it
        var u = c.usage, dd = c.details || {}, pcache = dd.promptCache;
        card.appendChild(el('div', 'meta-line summary-cost', 'summary call' + (dd.summaryModel ? ' by ' + str(dd.summaryModel) : '') +
          ': input ' + fmt(u.input || 0) + ' · output ' + fmt(u.output || 0) + ' · cache read ' + fmt(u.cacheRead || 0) +
          ' · cache write ' + fmt(u.cacheWrite || 0) + (u.cost && typeof u.cost.total === 'number' ? ' · ' + money(u.cost.total) : '') +
          (pcache ? (pcache.reused ? ' · over the session\'s cached prefix' : ' · cached prefix not used: ' + str(pcache.reason || '')) : '')));
      }
      var sum = el('details'); sum.open = k === D.compactions.length - 1;
      add(sum, el('summary', null, 'summary (' + fmt(c.summary.length) + ' chars)'), markdown(c.summary)); card.appendChild(sum);
      var led = c.ledger || {}, lb = el('div', 'block ledger');
      lb.appendChild(el('strong', null, 'ledger (verified facts)'));
      var any = false;
      if (led.lastUserRequest) { any = true; add(lb, el('div', 'meta-line', 'last user request'), pre(led.lastUserRequest)); }
      if (arr(led.modifiedFiles).length) { any = true; add(lb, el('div', 'meta-line', 'modified files'), pre(arr(led.modifiedFiles).map(str).join('\n'))); }
      if (arr(led.errors).length) { any = true; add(lb, el('div', 'meta-line', 'errors'), pre(arr(led.errors).map(str).join('\n'))); }
      if (!any) lb.appendChild(el('span', 'meta-line', ' — none recorded'));
      card.appendChild(lb);
      var files = c.details || {};
      ['readFiles', 'modifiedFiles'].forEach(function (key) {
        if (Array.isArray(files[key]) && files[key].length) add(card, el('div', 'meta-line', key + ': ' + files[key].map(str).join(', ')));
      });
      var list = el('details', 'summarized'); list.dataset.count = String(c.summarized.length);
      add(list, el('summary', null, 'entries it summarized (' + fmt(c.summarized.length) + ') — click one for its original text'));
      var filled = false;
      list.addEventListener('toggle', function () { if (list.open && !filled) { filled = true; entryList(c.summarized, list, 200); } });
      card.appendChild(list);
      tab.appendChild(card);
    });
  }
  function renderDropped() {
    var tab = $('tab-dropped'); tab.textContent = '';
    add(tab, el('h2', null, 'Out of the context on this branch (' + fmt(D.dropped.length) + ')'),
      el('p', 'hint', 'What `picontext dropped` lists: compacted = summarized by a compaction, omitted = hidden by a context edit, replaced = shown with other content. The file keeps the original text: click an id.'));
    if (!D.dropped.length) { tab.appendChild(el('p', 'hint', 'Nothing has left the context on this branch.')); return; }
    var table = el('table', 'grid'); tab.appendChild(table);
    add(table, add(el('tr'), el('th', null, 'entry'), el('th', null, 'role'), el('th', null, 'why'), el('th', null, 'by'), el('th', 'num', 'chars'), el('th', null, 'preview')));
    var shown = 0;
    function more() {
      var stop = Math.min(D.dropped.length, shown + 500);
      for (; shown < stop; shown++) {
        var d = D.dropped[shown], tr = el('tr', 'dropped'); tr.dataset.id = D.ids[d[0]]; tr.dataset.why = WHY[d[1]];
        add(tr, add(el('td'), ref(D.ids[d[0]])), el('td', null, kindOf(d[0])), el('td', null, WHY[d[1]]),
          add(el('td'), d[2] >= 0 ? ref(D.ids[d[2]]) : null), el('td', 'num', fmt(d[3])), el('td', null, D.previews[d[0]]));
        table.appendChild(tr);
      }
      var old = tab.querySelector('.more'); if (old) old.remove();
      if (shown < D.dropped.length) { var b = el('button', 'more', 'show more'); b.addEventListener('click', more); tab.appendChild(b); }
    }
    more();
  }
  function renderSession() {
    var tab = $('tab-session'); tab.textContent = '';
    add(tab, el('h2', null, 'Tokens and cost per model'));
    var table = el('table', 'grid models'); tab.appendChild(table);
    add(table, add(el('tr'), el('th', null, 'model'), el('th', 'num', 'calls'), el('th', 'num', 'input'), el('th', 'num', 'output'),
      el('th', 'num', 'cache read'), el('th', 'num', 'cache write'), el('th', 'num', 'cost')));
    var tot = { calls: 0, input: 0, output: 0, cacheRead: 0, cacheWrite: 0, cost: 0 };
    D.models.forEach(function (m) {
      var tr = el('tr'); tr.dataset.model = m.model;
      add(tr, el('td', null, m.model), el('td', 'num', fmt(m.calls)), el('td', 'num', fmt(m.input || 0)), el('td', 'num', fmt(m.output || 0)),
        el('td', 'num', fmt(m.cacheRead || 0)), el('td', 'num', fmt(m.cacheWrite || 0)), el('td', 'num', money(m.cost || 0)));
      table.appendChild(tr);
      Object.keys(tot).forEach(function (k) { tot[k] += m[k] || 0; });
    });
    var tr = el('tr', 'total');
    add(tr, el('th', null, 'total'), el('th', 'num', fmt(tot.calls)), el('th', 'num', fmt(tot.input)), el('th', 'num', fmt(tot.output)),
      el('th', 'num', fmt(tot.cacheRead)), el('th', 'num', fmt(tot.cacheWrite)), el('th', 'num', money(tot.cost)));
    tr.dataset.cost = String(tot.cost);
    table.appendChild(tr);
    add(tab, el('h2', null, 'Session'));
    var facts = el('table', 'grid'); tab.appendChild(facts);
    var h = D.header || {};
    [['file', D.file], ['name', D.name], ['session id', h.id], ['format version', h.version], ['created', h.timestamp], ['cwd', h.cwd],
     ['parent session', h.parentSession], ['entries', fmt(D.ids.length)], ['branch length', fmt(D.branch.length)],
     ['current leaf', D.leaf === null ? null : D.ids[D.leaf]], ['compaction settings', JSON.stringify(D.plot.settings)]].forEach(function (kv) {
      if (kv[1] === undefined || kv[1] === null) return;
      add(facts, add(el('tr'), el('th', null, kv[0]), el('td', null, kv[1])));
    });
  }

  // ---------------------------------------------------------------- wiring
  function setTab(name) {
    S.tab = name;
    Array.prototype.forEach.call(document.querySelectorAll('#tabs button'), function (b) { b.classList.toggle('on', b.dataset.tab === name); });
    Array.prototype.forEach.call(document.querySelectorAll('.tab'), function (t) { t.classList.toggle('on', t.id === 'tab-' + name); });
  }
  var times = {};
  function timed(name, fn) { var t = performance.now(); fn(); times[name] = Math.round(performance.now() - t); }
  function renderAll() {
    timed('header', renderHeader); timed('tree', refilter); timed('plot', renderPlot); timed('compactions', renderCompactions);
    timed('dropped', renderDropped); timed('session', renderSession);
    if (S.selected !== null && S.selected < D.ids.length) { var tab = S.tab; withLines(function () { showEntry(S.selected); setTab(tab); }); }
  }
  function wire() {
    $('tree').addEventListener('scroll', function () { paintTree(false); }, { passive: true });
    window.addEventListener('resize', function () { paintTree(true); });
    $('tree').addEventListener('click', function (ev) {
      var row = ev.target.closest('.row'); if (row) showEntry(Number(row.dataset.index));
    });
    document.body.addEventListener('click', function (ev) {
      var a = ev.target.closest('a.ref');
      if (a && a.dataset.goto !== undefined) { ev.preventDefault(); var i = Number(a.dataset.goto); revealInTree(i); showEntry(i); return; }
      if (a && a.dataset.compaction !== undefined) { ev.preventDefault(); setTab('compactions'); var card = $('compaction-' + a.dataset.compaction); if (card) { card.querySelector('details.summarized').open = true; card.scrollIntoView(); } }
    });
    // Up/Down walk the shown rows from the open entry (reading a long session without the mouse).
    $('tree').addEventListener('keydown', function (ev) {
      if (ev.key !== 'ArrowDown' && ev.key !== 'ArrowUp') return;
      ev.preventDefault();
      var k = S.selected === null ? -1 : S.rows.indexOf(D.order.indexOf(S.selected));
      var r = Math.max(0, Math.min(S.rows.length - 1, k + (ev.key === 'ArrowDown' ? 1 : -1)));
      if (!S.rows.length) return;
      var i = D.order[S.rows[r]];
      showEntry(i); revealInTree(i);
    });
    Array.prototype.forEach.call(document.querySelectorAll('#filters button'), function (b) {
      b.addEventListener('click', function () { S.filter = b.dataset.filter; markFilter(); refilter(); });
    });
    Array.prototype.forEach.call(document.querySelectorAll('#tabs button'), function (b) {
      b.addEventListener('click', function () { setTab(b.dataset.tab); });
    });
    var timer = null;
    $('search').addEventListener('input', function () {
      clearTimeout(timer);
      timer = setTimeout(function () { S.query = $('search').value; refilter(); }, 120);
    });
  }
  // Served by `picontext serve`: poll the file's stamp, reload the data when the session grows.
  function live(url) {
    var stamp = document.body.dataset.stamp;
    function tick() {
      fetch(url + '&stamp=1', { cache: 'no-store' }).then(function (r) { return r.json(); }).then(function (s) {
        if (s.stamp === stamp) return null;
        return fetch(url, { cache: 'no-store' }).then(function (r) { return r.json(); }).then(function (v) {
          return Promise.resolve(v.meta).then(function (meta) {
            stamp = v.stamp; document.body.dataset.stamp = stamp;
            load(meta, v.lines);
            renderAll();
            document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
          });
        });
      }).catch(function () {}).then(function () { setTimeout(tick, 1000); });
    }
    setTimeout(tick, 1000);
  }

  var t0 = performance.now();
  Promise.resolve().then(function () {
    var meta; timed('parse', function () { meta = JSON.parse($('pc-meta').textContent); });
    timed('load', function () { load(meta, $('pc-lines').textContent); });
    wire();
    renderAll();
    if (document.body.dataset.live) live(document.body.dataset.live);
    // ms from navigation start until the tree and the plot are drawn (the tests read it)
    document.body.dataset.ready = String(Math.round(performance.now()));
    document.body.dataset.scriptMs = String(Math.round(performance.now() - t0));
    document.body.dataset.timings = JSON.stringify(times);
  }).catch(function (err) {
    document.body.textContent = 'This page could not be read: ' + err + ' (it needs a browser with DecompressionStream).';
  });
})();
