"""The report's style sheet (inline in the page: the report fetches nothing).

Made to fit from a 800-pixel window up: headers wrap, names break anywhere, numbers never wrap,
and each table sits in a box of its own that scrolls sideways should a table ever be wider than
its card, so that the page itself never does.
"""

from __future__ import annotations

__all__ = ["REPORT_CSS"]

REPORT_CSS = """
:root{--ink:#111827;--muted:#6b7280;--line:#e5e7eb;--bg:#f8fafc;--card:#fff;--bad:#b91c1c}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);
font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1180px;margin:0 auto;padding:24px}
header h1{margin:0 0 4px;font-size:24px}
h2{font-size:18px;margin:0 0 4px;word-break:break-all}
h3{font-size:15px;margin:20px 0 8px}
h4{font-size:13px;margin:0 0 6px}
.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:18px 20px;
margin:18px 0;box-shadow:0 1px 2px rgba(0,0,0,.04)}
.meta{color:var(--muted);margin:2px 0;overflow-wrap:anywhere}
.note{margin:6px 0;padding:6px 10px;background:#fefce8;border-left:3px solid #eab308;
border-radius:4px;overflow-wrap:anywhere}
figure{margin:14px 0 4px}
svg.chart{width:100%;height:auto;font-size:11px;fill:var(--muted)}
svg.chart .grid{stroke:var(--line)}
svg.chart .axis-title{font-size:12px;fill:var(--ink)}
svg.legend{height:22px;width:auto;max-width:100%;font-size:12px;fill:var(--ink)}
svg.budget{width:100%;height:auto;font-size:13px}
svg .strong{font-weight:600}
figcaption{display:flex;flex-wrap:wrap;gap:8px 20px;align-items:center;margin-top:6px}
.keys{display:flex;flex-wrap:wrap;gap:4px 14px;margin:4px 0 8px;color:var(--ink)}
.key,.chip{display:inline-flex;align-items:center;gap:6px;white-space:nowrap}
.key i,.chip i{display:inline-block;width:14px;height:4px;border-radius:2px}
.chip i{width:10px;height:10px;border-radius:50%}
.key i.dash{height:0;border-top:2px dashed;border-radius:0}
.dash.red{color:#dc2626}.dash.grey{color:#6b7280;border-top-style:dotted}.dash.dark{color:#111827}
.grid{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:24px;align-items:start}
@media (max-width:900px){.grid{grid-template-columns:1fr}}
.table{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;width:100%;font-size:13px}
th{font-weight:600;text-align:left;vertical-align:bottom;color:var(--muted);
border-bottom:1px solid var(--line);padding:6px 8px}
td{border-bottom:1px solid var(--line);padding:6px 8px;overflow-wrap:anywhere}
th.num{text-align:right}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.bad{color:var(--bad);font-weight:600}
td.strong{font-weight:600}
tr.original td{color:#374151;background:#f9fafb}
details{margin:4px 0;color:var(--muted)}
details li{color:var(--ink);word-break:break-word}
.summaries{display:grid;grid-template-columns:repeat(auto-fit,minmax(320px,1fr));gap:14px}
.summary{border:1px solid var(--line);border-radius:8px;padding:10px 12px;background:#fcfcfd}
.summary pre{margin:0;max-height:360px;overflow:auto;white-space:pre-wrap;word-break:break-word;
font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
footer ul{margin:0;padding-left:18px;color:var(--muted)}
a{color:#1d4ed8;text-decoration:none}
@media (max-width:900px){main{padding:12px}.card{padding:14px 12px}
table{font-size:12px}th,td{padding:5px 5px}}
"""
