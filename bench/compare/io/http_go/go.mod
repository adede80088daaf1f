module weft/bench/compare/io/http_go

go 1.19
