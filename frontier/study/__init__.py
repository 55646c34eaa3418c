"""The apparatus around the product: measuring, comparing and writing up runs.

Benches (`bench`: recipes' tokens/s side by side; `bench_table`, `bench_head`, `bench_ngram`: one part of a step),
studies (`ngram_orders`, `roofline`: a Trn2 step predicted; `census`: every kernel at a profile's shapes;
`compressors`: classical compressors on the same split), judging runs (`compare`: mean, spread and t-tests;
`replay`: does this code reproduce a record?), and the book's machinery (`experiments`: runs as the chapters use
them; `ladder`: every rung of the write-up; `book`: the chapters run by papermill; `report`: tables for them;
`figures`: how they are drawn), the records they leave (`bench_records`: bench records, and runs excluded from
quotation), a pool of one-thread worker processes (`workers`), and their commands (`cli`, registered by
`frontier.cli`).

May import anything in the package but the command line. Nothing outside `frontier.study` imports it but
`frontier.cli` (its `cli` alone) and, while the trainer draws its loss curve, `frontier.figures` (a re-export).
"""
