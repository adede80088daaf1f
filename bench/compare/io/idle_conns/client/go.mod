module weft/bench/compare/io/idle_conns/client

go 1.19
