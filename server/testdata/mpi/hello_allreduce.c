/* An MPI hello world with an allreduce: every rank prints its rank, the
 * world size, the node it runs on (SLURMD_NODENAME, else its host name) and
 * the sum of 1..size computed by MPI_Allreduce; rank 0 checks the sum. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int rank, size, mine, sum = 0, len;
    char host[MPI_MAX_PROCESSOR_NAME];
    const char *node;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &len);
    node = getenv("SLURMD_NODENAME");
    mine = rank + 1;
    MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d on %s sum %d slurmd %s\n", rank, size, host, sum, node ? node : "-");
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0 && sum != size * (size + 1) / 2) {
        fprintf(stderr, "allreduce: sum %d, want %d\n", sum, size * (size + 1) / 2);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    MPI_Finalize();
    return 0;
}
