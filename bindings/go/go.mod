module qd

go 1.19
