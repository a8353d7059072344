"""Runs the SQL of docs/clickhouse.md with chDB (ClickHouse in-process) on access logs, and
prints what its queries answer as one JSON object: {"links": [...], "versions": [...],
"campaigns": [...]}, each a list of rows.

    python clickhouse.py docs/clickhouse.md BOT_PATTERN LOG...

Each block is used as written, but for where the lines come from: the documented load reads
standard input (`input(...)`, for clickhouse-client); here each file is read with `file(...)`,
and the bot list parameter is given as a literal.
"""
import json
import re
import sys
import tempfile

from chdb import session

doc, bots, logs = sys.argv[1], sys.argv[2], sys.argv[3:]
blocks = dict(re.findall(r"```sql\n-- couchlink: (\w+)\n(.*?)```", open(doc).read(), re.S))
literal = "'" + bots.replace("\\", "\\\\").replace("'", "\\'") + "'"
with tempfile.TemporaryDirectory() as data:
    db = session.Session(data)
    db.query(blocks["table"])
    for log in logs:
        load = blocks["load"].replace("input('line String')", f"file('{log}', LineAsString, 'line String')")
        db.query(load.replace("{bots:String}", literal).replace("FORMAT LineAsString", ""))
    answers = {}
    for name in ("links", "versions", "campaigns"):
        rows = db.query(blocks[name], "JSONEachRow").bytes().decode()
        answers[name] = [json.loads(row) for row in rows.splitlines() if row]
    print(json.dumps(answers))
