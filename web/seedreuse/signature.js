// The graph signature: a cheap synchronous fingerprint of everything that can change the API
// prompt (node ids, types, modes, widget values, what feeds each input), over the root graph and its
// subgraphs. A visitor may be passed to see every graph, node and widget on the way (changes.js
// installs its change hooks so). Imports only core.js and graph.js, so every module may use it
// without an import cycle. Only exports.
import { NS, TIMELINE_WIDGET } from "./core.js";
import { allGraphs, inputSource, nodesOf } from "./graph.js";

// visit: optional { graph(g), node(n), widget(w) }.
export function graphSignature(visit = null) {
  NS.work.signatures++;
  const parts = [];
  for (const g of allGraphs()) {
    if (visit) visit.graph(g);
    for (const n of nodesOf(g)) {
      if (visit) visit.node(n);
      const w = (n.widgets || []).filter((x) => x.name !== TIMELINE_WIDGET).map((x) => {
        if (visit) visit.widget(x);
        const v = x.value;
        return typeof v === "object" && v !== null ? "" : v;
      });
      const ins = (n.inputs || []).map((_, k) => inputSource(n, k));
      parts.push([n.id, n.type, n.mode, w, ins]);
    }
  }
  try {
    return JSON.stringify(parts);
  } catch (_) {
    return String(Math.random());
  }
}
