const NS = 'http://www.w3.org/2000/svg';

/**
 * A small line chart as inline SVG (no library): one or more series over the same x steps,
 * with a title and a text summary for screen readers.
 */
export function lineChart(
  title: string,
  series: { name: string; color: string; values: number[] }[],
  width = 360,
  height = 110,
): SVGSVGElement {
  const svg = document.createElementNS(NS, 'svg');
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.setAttribute('width', String(width));
  svg.setAttribute('height', String(height));
  svg.setAttribute('role', 'img');
  const summary = series.map(
    (s) => `${s.name}: last ${s.values.at(-1) ?? 0}, max ${Math.max(0, ...s.values)}`,
  );
  svg.setAttribute('aria-label', `${title}. ${summary.join('; ')}`);
  const max = Math.max(1, ...series.flatMap((s) => s.values));
  const pad = 18;
  const axis = document.createElementNS(NS, 'line');
  Object.entries({ x1: pad, y1: height - pad, x2: width, y2: height - pad, stroke: '#8a94a3' }).forEach(
    ([k, v]) => axis.setAttribute(k, String(v)),
  );
  svg.append(axis);
  const label = document.createElementNS(NS, 'text');
  label.setAttribute('x', '0');
  label.setAttribute('y', '12');
  label.textContent = `max ${max}`;
  svg.append(label);
  series.forEach((s, row) => {
    const n = Math.max(2, s.values.length);
    const points = s.values.map((v, i) => {
      const x = pad + (i * (width - pad)) / (n - 1);
      const y = height - pad - (v / max) * (height - 2 * pad);
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    });
    const line = document.createElementNS(NS, 'polyline');
    line.setAttribute('points', points.join(' '));
    line.setAttribute('fill', 'none');
    line.setAttribute('stroke', s.color);
    line.setAttribute('stroke-width', '2');
    svg.append(line);
    const legend = document.createElementNS(NS, 'text');
    legend.setAttribute('x', String(width - 120));
    legend.setAttribute('y', String(12 + row * 13));
    legend.setAttribute('fill', s.color);
    legend.textContent = `${s.name} (${s.values.at(-1) ?? 0})`;
    svg.append(legend);
  });
  return svg;
}
