! allreduce_check_f08.f90 - the same idea through the Fortran 2008 bindings (use mpi_f08):
! MPI_Allreduce and MPI_Iallreduce of INTEGER and REAL sums on MPI_COMM_WORLD and a duplicate.
!     mpifort -O2 allreduce_check_f08.f90 -o allreduce_check_f08
!     mpirun -n 4 ./allreduce_check_f08          (prints "N passed, M failed")
program allreduce_check_f08
  use mpi_f08
  implicit none
  integer, parameter :: n = 20000
  integer :: rank, nranks, i, passed, failed
  integer :: a(n)
  real :: x(n), y(n)
  type(MPI_Comm) :: dup
  type(MPI_Request) :: req

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  passed = 0
  failed = 0
  do i = 1, n
    a(i) = i + rank
    x(i) = real(mod(i, 100) + rank) * 0.5
  end do
  call MPI_Allreduce(MPI_IN_PLACE, a, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  call report(all(a == [(nranks * i + nranks * (nranks - 1) / 2, i = 1, n)]), 'integer in place')
  call MPI_Comm_dup(MPI_COMM_WORLD, dup)
  call MPI_Iallreduce(x, y, n, MPI_REAL, MPI_SUM, dup, req)
  call MPI_Wait(req, MPI_STATUS_IGNORE)
  call report(all(y == [(real(nranks * mod(i, 100)) * 0.5 + real(nranks * (nranks - 1) / 2) * 0.5, &
                         i = 1, n)]), 'dup: iallreduce real')
  call MPI_Comm_free(dup)
  if (rank == 0) print '(i0, a, i0, a)', passed, ' passed, ', failed, ' failed'
  call MPI_Finalize()
  if (failed > 0) stop 1

contains

  subroutine report(cond, what)
    logical, intent(in) :: cond
    character(*), intent(in) :: what
    logical :: ok
    call MPI_Allreduce(cond, ok, 1, MPI_LOGICAL, MPI_LAND, MPI_COMM_WORLD)
    if (ok) then
      passed = passed + 1
    else
      failed = failed + 1
      if (rank == 0) print '(2a)', 'FAIL ', what
    end if
  end subroutine report
end program allreduce_check_f08
