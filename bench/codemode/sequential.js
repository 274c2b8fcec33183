let n = 0;
for (let i = 0; i < 100; i++) {
  const r = await tools.bench.echo({i, query: "hello"});
  n += r.n;
}
return n;
