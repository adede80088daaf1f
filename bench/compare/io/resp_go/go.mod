module weft/bench/compare/io/resp_go

go 1.19
