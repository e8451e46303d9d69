//! SQLite (the amalgamation bundled in libsqlite3-sys, through rusqlite): an in-memory
//! database with inserts, an index, joins, aggregates and updates.
fn main() {
    let n = proftrust_workloads::size() as i64;
    let db = rusqlite::Connection::open_in_memory().unwrap();
    db.execute_batch(
        "CREATE TABLE item(id INTEGER PRIMARY KEY, cat INTEGER, name TEXT, price REAL);
         CREATE TABLE cat(id INTEGER PRIMARY KEY, label TEXT);",
    )
    .unwrap();
    let rows = 400 * n;
    {
        let tx = db.unchecked_transaction().unwrap();
        {
            let mut c = tx.prepare("INSERT INTO cat VALUES (?1, ?2)").unwrap();
            for i in 0..50 {
                c.execute(rusqlite::params![i, format!("category {i}")])
                    .unwrap();
            }
            let mut s = tx
                .prepare("INSERT INTO item(cat, name, price) VALUES (?1, ?2, ?3)")
                .unwrap();
            for i in 0..rows {
                let k = (i * 7919) % 1009;
                s.execute(rusqlite::params![
                    k % 50,
                    format!("item-{k}-{i}"),
                    (k as f64) * 0.37
                ])
                .unwrap();
            }
        }
        tx.commit().unwrap();
    }
    db.execute_batch("CREATE INDEX item_cat ON item(cat, price);")
        .unwrap();
    let mut sum = 0i64;
    for r in 0..20 {
        let mut q = db
            .prepare(
                "SELECT c.label, count(*), sum(i.price) FROM item i JOIN cat c ON c.id = i.cat
                 WHERE i.price > ?1 GROUP BY c.label ORDER BY 3 DESC LIMIT 10",
            )
            .unwrap();
        let it = q
            .query_map([r as f64 * 10.0], |row| row.get::<_, i64>(1))
            .unwrap();
        for c in it {
            sum += c.unwrap();
        }
        sum += db
            .query_row(
                "SELECT count(*) FROM item WHERE name LIKE ?1",
                [format!("item-{}%", r * 3)],
                |row| row.get::<_, i64>(0),
            )
            .unwrap();
    }
    db.execute("UPDATE item SET price = price * 1.1 WHERE cat % 3 = 0", [])
        .unwrap();
    proftrust_workloads::done("sqlite", sum as u64);
}
