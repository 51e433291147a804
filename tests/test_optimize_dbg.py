import sys
sys.path.insert(0, "/work/main/tests")
from test_optimize_rl import Model, rows_for, write_input, open_index, optimize_missed, openai_settings, QUESTION, ORIGINAL, DECOY, db  # noqa
def test_dbg(db, scripted_server):
    model = Model(lambda page, n, prompt: "appliances/fridge/ice box thaw")
    scripted_server.set_responder(model)
    rows = rows_for(db, [(QUESTION, ORIGINAL, DECOY)])
    csv = write_input(db, rows)
    index = open_index(db)
    print([ (h.path, h.score) for h in index.search(QUESTION, k=5)])
    report = optimize_missed(rows, input_csv=csv, settings=openai_settings(scripted_server, db=db),
                             enable_rl=True, index=index, progress=False)
    print(report.errors, report.copies)
    print(report.rows[0].get("Retrieved Files"), report.rows[0].get("Attempts"))
    for b in scripted_server.requests:
        m = b["messages"][-1]
        if m["role"] == "tool": print("TOOL", m["content"][:600])
    assert 0
