//! Lua 5.4 (from lua-src, through mlua): an interpreter running a small benchmark script
//! (recursion, tables, strings, closures).
fn main() {
    let n = proftrust_workloads::size();
    let lua = mlua::Lua::new();
    let script = r#"
        local n = ...
        local function fib(k) if k < 2 then return k end return fib(k - 1) + fib(k - 2) end
        local acc = 0
        for r = 1, 2 * n do
            acc = acc + fib(18)
            local t = {}
            for i = 1, 2000 do t[i] = (i * 7919 + r) % 1000 end
            table.sort(t)
            local words = {}
            for i = 1, 300 do words[#words + 1] = string.format("%d:%s", t[i], string.rep("x", i % 7)) end
            local s = table.concat(words, ",")
            for w in string.gmatch(s, "%d+") do acc = acc + #w end
            local m = {}
            for i = 1, 500 do m["k" .. (i % 97)] = (m["k" .. (i % 97)] or 0) + i end
            for _, v in pairs(m) do acc = acc + v end
        end
        return acc
    "#;
    let acc: i64 = lua.load(script).call(n as i64).unwrap();
    proftrust_workloads::done("lua", acc as u64);
}
