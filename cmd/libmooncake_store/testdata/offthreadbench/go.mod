module offthreadbench

go 1.24
