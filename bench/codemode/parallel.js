const results = await Promise.all(Array.from({length: 100}, (_, i) => tools.bench.echo({i, query: "hello"})));
return results.reduce((n, r) => n + r.n, 0);
