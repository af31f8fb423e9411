"""The built-in scenario families, registered exactly as a third party's would be (the ``redraft.scenarios``
entry points name these modules): each module's import runs its ``@scenario`` decorator.

```
arithmetic            word problems, a calculator's check, the gold number held out
humaneval             HumanEval's 164 problems, the prompt's examples as feedback, the hidden tests held out
json_extract          fields out of text into a JSON Schema, the gold object held out
sql                   questions about a shop database, the query run as feedback, the gold result held out
pipeline              a data pipeline over messy files, the contract as feedback, the gold table held out
constrained_writing   writing under exact rules, every rule in the task (the feedback is the grade)
incident              incident summaries from service logs, the sections as feedback, the facts held out
cited_answer          answers from a given document with citations, the rules as feedback, a rubric to judge
reasoning             reasoning-gym's seeded data sets and their own checkers
```

The contract they implement (`redraft.scenarios.Scenario`), task files and user checks are the package above.
Nothing here is imported by it: a scenario is loaded by name, through its entry point.
"""
