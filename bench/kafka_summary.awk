# Summarises `go test -bench KafkaPort -count N` output (make
# bench-kafka; BenchmarkKafkaVsNative's, in one process, too): per
# sub-benchmark the median and the range of records/s, of the node's CPU
# ns per record (node-cpu-ns/record; cpu-ns/record, client and node
# together, for KafkaVsNative) and of the client's, over the runs; then,
# for produce and consume, the Kafka port's throughput and node CPU per
# record as ratios of its medians to the native port's, each with the
# widest range the runs allow. The issue's target: the Kafka port costs
# no more than 15 % of throughput (a throughput ratio of at least 0.85).
function median(a, n,    i, j, t, b) {
	for (i = 1; i <= n; i++) b[i] = a[i]
	for (i = 2; i <= n; i++) for (j = i; j > 1 && b[j-1] > b[j]; j--) { t = b[j]; b[j] = b[j-1]; b[j-1] = t }
	return n % 2 ? b[(n+1)/2] : (b[n/2] + b[n/2+1]) / 2
}
function lo(a, n,    i, m) { m = a[1]; for (i = 2; i <= n; i++) if (a[i] < m) m = a[i]; return m }
function hi(a, n,    i, m) { m = a[1]; for (i = 2; i <= n; i++) if (a[i] > m) m = a[i]; return m }
/^BenchmarkKafka(VsNative|Port)\// {
	name = $1; sub(/^BenchmarkKafka(VsNative|Port)\//, "", name); sub(/-[0-9]+$/, "", name)
	for (i = 2; i <= NF; i++) {
		if ($i == "records/s") rate[name, ++nr[name]] = $(i-1)
		if ($i == "cpu-ns/record" || $i == "node-cpu-ns/record") cpu[name, ++nc[name]] = $(i-1)
		if ($i == "client-cpu-ns/record") ccpu[name, ++ncc[name]] = $(i-1)
	}
}
END {
	printf "%-16s %14s %25s %14s %17s %14s %17s\n", "", "records/s med", "(min - max)", "node ns/rec", "(min - max)", "client ns/rec", "(min - max)"
	split("produce/kafka produce/native consume/kafka consume/native", names, " ")
	for (k = 1; k <= 4; k++) {
		n = names[k]
		for (i = 1; i <= nr[n]; i++) { r[i] = rate[n, i]; c[i] = cpu[n, i]; cc[i] = ccpu[n, i] }
		if (nr[n] == 0) continue
		printf "%-16s %14.0f %12.0f - %10.0f %14.0f %8.0f - %6.0f", n, median(r, nr[n]), lo(r, nr[n]), hi(r, nr[n]),
			median(c, nr[n]), lo(c, nr[n]), hi(c, nr[n])
		if (ncc[n] > 0) printf " %14.0f %8.0f - %6.0f", median(cc, ncc[n]), lo(cc, ncc[n]), hi(cc, ncc[n])
		printf "\n"
	}
	split("produce consume", ops, " ")
	for (o = 1; o <= 2; o++) {
		op = ops[o]; k = op "/kafka"; v = op "/native"
		if (nr[k] == 0 || nr[v] == 0) continue
		for (i = 1; i <= nr[k]; i++) { rk[i] = rate[k, i]; ck[i] = cpu[k, i] }
		for (i = 1; i <= nr[v]; i++) { rv[i] = rate[v, i]; cv[i] = cpu[v, i] }
		printf "%s, Kafka/native (ratio of medians): throughput %.2f (range %.2f - %.2f), node cpu per record %.2f (range %.2f - %.2f)\n", op,
			median(rk, nr[k]) / median(rv, nr[v]), lo(rk, nr[k]) / hi(rv, nr[v]), hi(rk, nr[k]) / lo(rv, nr[v]),
			median(ck, nr[k]) / median(cv, nr[v]), lo(ck, nr[k]) / hi(cv, nr[v]), hi(ck, nr[k]) / lo(cv, nr[v])
	}
}
