"""Reports over run folders (see docs/contracts.md for the folder and record schemas).

- `runfiles`   reads a run folder, tolerating missing files and damaged lines
- `catalog`    every metric declared once: tables, exports, database, Prometheus and docs derive from it
- `windows`    per-stream measurement windows from samples (bitrates, deltas, missing streams)
- `samples`    samples.jsonl folded in one pass that goes on where it stopped (a run read as it grows)
- `stats`      small statistics: percentiles, means, spreads
- `series`     per-participant-count series: streams, freezes, quality, playback, checks, probes, health
- `cost`       the SFU's CPU per forwarded packet and stream, and its traffic by protocol
- `table`, `tables`  the Table type; the measurement, health, cost and Tables IV–VI builders
- `metrics`    `analyse` (one run's Analysis), its headline and status, `summary`
- `knee`, `clientbound`  where an SFU stops coping; whether the clients were the limit instead
- `run`, `runfigures`  one run's report.html, and its figures
- `compare`    several SFUs side by side; `study` the study's comparison over repeats
- `history`    results DB and trends over nights
- `export`     CSV / JSON of the tables
- `prometheus` live samples as Prometheus exposition text (+ optional Pushgateway push)
- `verify`     renders a report in headless Chromium and lists what is broken
- `synthetic`  generates realistic run folders for tests and the benchmark
- `plotting`, `html`, `reference`, `scenario`, `traffic`  figure style, page blocks, the 2018
  study's published figures, a run's scenario words, traffic anomalies
"""
