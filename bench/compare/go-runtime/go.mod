module weft/bench/compare/goruntime

go 1.19
