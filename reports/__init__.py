"""Reports over run folders (see docs/contracts.md for the folder and record schemas).

- `runfiles`   reads a run folder, tolerating missing files and damaged lines
- `metrics`    pure functions over the records: window bitrates, aggregates, study-style tables, `summary`
- `knee`       where an SFU stops coping
- `run`        one run's report.html
- `compare`    several SFUs side by side
- `history`    results DB and trends over nights
- `export`     CSV / JSON of the tables
- `prometheus` live samples as Prometheus exposition text (+ optional Pushgateway push)
- `verify`     renders a report in headless Chromium and lists what is broken
- `synthetic`  generates realistic run folders for tests and the benchmark
- `plotting`, `html`, `study`  shared figure style, page blocks, the 2018 study's published figures
"""
