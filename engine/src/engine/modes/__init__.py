"""The modes besides training (`mode=`), one module each: eval, predict, benchmark, inspect,
validate, cache, shards. engine/app.py dispatches to them."""
