module weft/bench/compare/io/idle_conns/server_go

go 1.19
