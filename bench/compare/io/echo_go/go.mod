module weft/bench/compare/io/echo_go

go 1.19
