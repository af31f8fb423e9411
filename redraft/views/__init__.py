"""What a person reads of a run: the report, the terminal trace, the exported tables, the summary table.

```
report          redraft report: report.html and a page per task, streamed (templates/, autoescaped)
plots           the report's plots (matplotlib, Agg), as PNG bytes
trace           redraft trace: one task's rounds in the terminal (rich; model text never markup)
export          redraft export: results and rounds tables (Parquet, CSV), columns from the Structs
summary_table   the rows of the summary table, for the end of redraft run and the report alike
fields          what the views show of a frame beyond the fields they render by name
templating      the Jinja2 environment (autoescape on)
```

Views read the run directory only through `redraft.rundir`.
"""

from redraft.views._spending import PARTS_HEADER, TABLE_HEADER, SpendingView

__all__ = ["PARTS_HEADER", "TABLE_HEADER", "SpendingView"]
