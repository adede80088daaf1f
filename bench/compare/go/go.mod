module weft/bench/compare/go

go 1.19
