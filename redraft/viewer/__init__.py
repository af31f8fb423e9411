"""``redraft view``: a local web app over the run directories under a root, and a static bundle of its pages.

```
catalog        which directories lie under the root (runs, comparisons, tunes, judge cards), their state
cards          a directory's line on the first page: tasks done, pass rates by basis, cost, wall time
index          a run's tasks as small rows, read from its records and again as it grows
filters        the task list's filters, from and into the URL
site           the pages, rendered by the report's templates and the viewer's own (autoescaped)
links          the server's URLs or a bundle's relative files
app            the Starlette app: its guards (root, access token, the session's post token)
review         labels and pairwise choices, through redraft.rundir.labels; review_routes, their pages and posts
bundle         redraft view --bundle: the same pages as static files
serve          the command's server: loopback by default, a token beyond it
```

The viewer reads run directories only through `redraft.rundir` and writes nothing but a directory's
``labels.jsonl``. Starlette and uvicorn are the ``view`` extra's, imported when a server is made.
"""

from redraft.viewer._bundle import write_bundle
from redraft.viewer._serve import make_app, serve

__all__ = ["make_app", "serve", "write_bundle"]
