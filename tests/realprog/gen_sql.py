#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes a deterministic SQL workload for the sqlite3 CLI (tests/realprog).

Usage: gen_sql.py OUTFILE [ORDERS]   (default 200000 orders, fixed seed)

Schema of customers and orders, inserts in transactions of 10000 rows, three
indexes, then aggregate queries, a join, a window function, a recursive CTE,
an update, a delete, integrity_check and VACUUM.  Every query has a total
ORDER BY, so the output is fully determined by the data.
"""
import random
import sys

CITIES = ["Aberdeen", "Bergen", "Cork", "Dresden", "Evora", "Faro", "Graz", "Haarlem",
          "Innsbruck", "Jena", "Krakow", "Lund", "Malmo", "Nantes", "Oulu", "Porto"]
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
         "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa"]


def main():
    out = sys.argv[1]
    norders = int(sys.argv[2]) if len(sys.argv) > 2 else 200000
    ncust = max(10, norders // 10)
    rng = random.Random(4242)
    w = []
    w.append("PRAGMA cache_size = -4000;")
    w.append("CREATE TABLE customer(id INTEGER PRIMARY KEY, name TEXT NOT NULL, "
             "city TEXT NOT NULL, signup INTEGER NOT NULL);")
    w.append("CREATE TABLE orders(id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL "
             "REFERENCES customer(id), day INTEGER NOT NULL, amount INTEGER NOT NULL, note TEXT);")
    w.append("BEGIN;")
    for c in range(1, ncust + 1):
        name = "%s-%s-%d" % (rng.choice(WORDS), rng.choice(WORDS), rng.randrange(100000))
        w.append("INSERT INTO customer VALUES(%d,'%s','%s',%d);"
                 % (c, name, rng.choice(CITIES), rng.randrange(0, 3650)))
    w.append("COMMIT;")
    for o in range(1, norders + 1):
        if o % 10000 == 1:
            w.append("BEGIN;")
        cust = int(rng.paretovariate(1.2)) % ncust + 1 if rng.random() < 0.5 else rng.randrange(1, ncust + 1)
        note = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(0, 12)))
        note_sql = "NULL" if not note else "'%s'" % note
        w.append("INSERT INTO orders(customer_id, day, amount, note) VALUES(%d,%d,%d,%s);"
                 % (cust, rng.randrange(0, 3650), rng.randrange(1, 100000), note_sql))
        if o % 10000 == 0 or o == norders:
            w.append("COMMIT;")
    w.append("CREATE INDEX orders_customer ON orders(customer_id);")
    w.append("CREATE INDEX orders_day_amount ON orders(day, amount);")
    w.append("CREATE INDEX customer_city ON customer(city, name);")
    w.append("ANALYZE;")
    w.append("SELECT 'totals', count(*), sum(amount), min(day), max(day), count(note) FROM orders;")
    w.append("SELECT city, count(*), min(name), max(name) FROM customer GROUP BY city ORDER BY city;")
    w.append("SELECT day / 365 AS year, count(*), sum(amount), printf('%.3f', avg(amount)) "
             "FROM orders GROUP BY year ORDER BY year;")
    w.append("SELECT c.id, c.name, c.city, count(o.id) AS n, sum(o.amount) AS total "
             "FROM customer c JOIN orders o ON o.customer_id = c.id "
             "GROUP BY c.id ORDER BY total DESC, c.id LIMIT 25;")
    w.append("SELECT c.city, o.day / 365 AS year, count(*), sum(o.amount) "
             "FROM orders o JOIN customer c ON c.id = o.customer_id "
             "WHERE o.amount > 50000 GROUP BY c.city, year ORDER BY c.city, year;")
    w.append("SELECT count(*), sum(amount) FROM orders WHERE day BETWEEN 1000 AND 1100 AND amount < 5000;")
    w.append("SELECT id, customer_id, day, amount, sum(amount) OVER (PARTITION BY customer_id "
             "ORDER BY day, id) AS running, rank() OVER (PARTITION BY customer_id ORDER BY amount DESC, id) "
             "FROM orders WHERE customer_id IN (4, 17, 99, 1234, 19999) ORDER BY customer_id, day, id;")
    w.append("SELECT note, count(*) FROM orders WHERE note IS NOT NULL "
             "GROUP BY note HAVING count(*) > 1 ORDER BY count(*) DESC, note LIMIT 20;")
    w.append("SELECT length(group_concat(note, '|')), count(DISTINCT note) FROM orders;")
    w.append("SELECT id, note FROM orders WHERE note IS NOT NULL ORDER BY note DESC, id LIMIT 10 OFFSET 5000;")
    w.append("WITH RECURSIVE seq(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM seq WHERE x < 50000) "
             "SELECT count(*), sum(x * x % 1000003) FROM seq;")
    w.append("SELECT customer_id, n FROM (SELECT customer_id, count(*) AS n FROM orders GROUP BY customer_id) "
             "WHERE n > 3 ORDER BY n DESC, customer_id LIMIT 10;")
    w.append("BEGIN;")
    w.append("UPDATE orders SET amount = amount + 7, note = coalesce(note, '') || ' upd' WHERE day % 7 = 0;")
    w.append("SELECT 'updated', changes();")
    w.append("DELETE FROM orders WHERE amount < 2000;")
    w.append("SELECT 'deleted', changes();")
    w.append("COMMIT;")
    w.append("SELECT 'after', count(*), sum(amount), total_changes() FROM orders;")
    w.append("PRAGMA integrity_check;")
    w.append("VACUUM;")
    w.append("SELECT 'vacuumed', count(*), sum(amount) FROM orders;")
    w.append("PRAGMA integrity_check;")
    with open(out, "w") as f:
        f.write("\n".join(w) + "\n")


if __name__ == "__main__":
    main()
