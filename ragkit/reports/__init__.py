"""Reports over results files: `html` (one self-contained HTML report of one or more runs) and `compare`
(question-by-question deltas between two runs, with significance)."""
