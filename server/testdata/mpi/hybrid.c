/* Hybrid MPI + OpenMP: every rank counts its OpenMP threads in a parallel
 * region and the ranks sum them with MPI_Allreduce. */
#include <mpi.h>
#include <omp.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int provided, rank, size, threads = 0, total = 0, len;
    char host[MPI_MAX_PROCESSOR_NAME];

    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &len);
#pragma omp parallel reduction(+ : threads)
    threads += 1;
    MPI_Allreduce(&threads, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("hybrid rank %d of %d on %s threads %d total %d\n", rank, size, host, threads, total);
    MPI_Finalize();
    return 0;
}
