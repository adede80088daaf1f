module weft/bench/compare/io/loadgen

go 1.19
