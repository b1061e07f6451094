"""Pages per second over the ICDAR-2013 development set (57 PDFs): region detection (ragnb.docs.pdf.regions_many), and
with `--stage offline` regions plus offline parsing of each page (`table_grid` on table regions; no rendering).
Regions are detected afresh (the region cache off), by the default detectors (the layout model when installed).

Engines: local with 1 and 2 worker processes, and Ray Data on a local Ray with 2 CPUs (if ray is installed:
pip install "ragnb[scale]"). Ray's start-up is timed apart; every engine's regions are checked equal to the
1-process result. The machine may be shared: each configuration runs `--repeat` times and every run is printed.

    python bench/scale.py [--repeat 2] [--limit N] [--stage regions|offline]
"""
import argparse, resource, time
from ragnb.core.engine import map_items
from ragnb.docs.pdf import regions_many, open_pdf, detect_regions, offline_page, Region
from ragnb.core.samples import shared_path

if __name__ == '__main__':  # region workers are spawned: they import this file without running it
    ap = argparse.ArgumentParser()
    ap.add_argument('--repeat', type=int, default=2)
    ap.add_argument('--limit', type=int, default=None, help='first N files only')
    ap.add_argument('--stage', choices=['regions', 'offline'], default='regions')
    ap.add_argument('--only-ray', action='store_true')
    a = ap.parse_args()

    def offline_item(item):
        "Regions and the offline parse of one page (a module-level function: workers import or receive it)."
        path, pno = item
        page = open_pdf(path)[pno - 1]
        regions = [Region('bench', pno, i, r['bbox'], kind=r['kind'], source=r['source'])
                   for i, r in enumerate(detect_regions(page), 1)]
        pp = offline_page(page, regions)
        return pp.markdown, pp.tables

    def run(files, engine, workers):
        if a.stage == 'regions': return regions_many(files, engine=engine, workers=workers, cache=False)
        return map_items(offline_item, [(str(f), p) for f in files for p in range(1, open_pdf(f).page_count + 1)], engine, workers)

    files = sorted(shared_path('documents', 'icdar2013').glob('*/*.pdf'))[:a.limit]
    pages = sum(open_pdf(f).page_count for f in files)
    print(f"ICDAR-2013 dev set: {len(files)} PDFs, {pages} pages; stage: {a.stage}")
    configs = [('local', 1), ('local', 2)] if not a.only_ray else []
    try:
        import ray  # noqa: F401
        from ragnb.core.engine import ray_init
        t = time.perf_counter(); ray_init(2); print(f"Ray start-up (2 CPUs): {time.perf_counter() - t:.1f} s (not counted below)")
        configs.append(('ray', 2))
    except ImportError: print("ray is not installed: Ray skipped")
    ref = None
    print("CPU s: this process and its workers (local: its child processes; Ray: the `ray::` worker processes, by psutil).")
    print("cores: CPU s / wall s, the share of the machine the run obtained (2 = both cores of an idle machine).")
    print(f"{'engine':<8} {'workers':>7} {'run':>4} {'seconds':>8} {'pages/s':>8} {'CPU s':>7} {'cores':>6} {'CPU ms/page':>11}")

    def cpu(engine='local'):
        "CPU seconds so far of this process and the engine's workers."
        own = sum(resource.getrusage(w).ru_utime + resource.getrusage(w).ru_stime for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
        if engine == 'local': return own
        import psutil  # Ray's worker processes are the raylet's children, not ours
        workers = [p for p in psutil.process_iter(['name', 'cmdline'])
                   if (p.info['name'] or '').startswith('ray::') or (p.info['cmdline'] or [''])[0].startswith('ray::')]
        return own + sum(sum(p.cpu_times()[:2]) for p in workers if p.is_running())
    for _ in range(a.repeat):
        for engine, w in configs:
            t, c = time.perf_counter(), cpu(engine); out = run(files, engine, w); s, c = time.perf_counter() - t, cpu(engine) - c
            ref = out if ref is None else ref
            assert out == ref, f"{engine} x{w} differs from the first run"
            used = f"{c:>7.1f} {c / s:>6.2f} {1000 * c / pages:>11.1f}"
            print(f"{engine:<8} {w:>7} {_ + 1:>4} {s:>8.1f} {pages / s:>8.2f} {used}", flush=True)
