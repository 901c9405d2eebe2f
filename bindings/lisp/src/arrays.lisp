;;;; arrays.lisp - Lisp arrays to foreign pointers.
;;;;
;;;; Specialised simple vectors ((simple-array single-float (*)),
;;;; (simple-array (signed-byte 32) (*)), ...) are passed in place: CFFI pins
;;;; them for the duration of the call (zero copy). Other sequences and 2-D
;;;; arrays (rows of coordinates) are copied into such a vector first. A CFFI
;;;; foreign pointer is passed through unchanged (host or, for the index API,
;;;; device memory).

(in-package #:knn-gpgpu)

(deftype float-vector () '(simple-array single-float (*)))
(deftype int32-vector () '(simple-array (signed-byte 32) (*)))
(deftype int64-vector () '(simple-array (signed-byte 64) (*)))
(deftype octet-vector () '(simple-array (unsigned-byte 8) (*)))

(defconstant +int-max+ (1- (expt 2 31)))

(defun c-int (value name)
  "VALUE if it is an integer that fits a C int, else a KNN-USAGE-ERROR."
  (unless (and (integerp value) (<= (- (1+ +int-max+)) value +int-max+))
    (usage-error "~A = ~S is not an integer that fits a C int" name value))
  value)

(defun float-vector (data name)
  "DATA as a (simple-array single-float (*)): itself when it already is one,
else a converted copy. Accepts vectors, lists and arrays of any rank
(row-major)."
  (cond ((typep data 'float-vector) data)
        ((and (arrayp data) (not (vectorp data)))
         #+sbcl (if (typep data '(simple-array single-float))
                    (sb-ext:array-storage-vector data)
                    (float-vector-copy data name))
         #-sbcl (float-vector-copy data name))
        ((typep data 'sequence) (float-vector-copy data name))
        (t (usage-error "~A must be a sequence or array of reals, not ~S" name (type-of data)))))

(defun float-vector-copy (data name)
  (let* ((n (if (arrayp data) (array-total-size data) (length data)))
         (out (make-array n :element-type 'single-float)))
    (flet ((put (i x)
             (unless (realp x)
               (usage-error "~A: element ~D is ~S, not a real number" name i x))
             (setf (aref out i) (coerce x 'single-float))))
      (if (arrayp data)
          (dotimes (i n) (put i (row-major-aref data i)))
          (let ((i 0)) (map nil (lambda (x) (put i x) (incf i)) data))))
    out))

(defun integer-vector (data element-type name)
  "DATA as a simple vector of ELEMENT-TYPE ((signed-byte 32|64)), copied unless it is one."
  (if (typep data `(simple-array ,element-type (*)))
      data
      (let* ((n (length data))
             (out (make-array n :element-type element-type))
             (i 0))
        (map nil (lambda (x)
                   (unless (typep x element-type)
                     (usage-error "~A: element ~D is ~S, not of type ~S" name i x element-type))
                   (setf (aref out i) x)
                   (incf i))
             data)
        out)))

(defun rows-of (data dim name)
  "Check and convert row data: a flat vector of n*DIM floats or an (n DIM)
array. Returns (values float-vector n)."
  (when (and (arrayp data) (= (array-rank data) 2) (/= (array-dimension data 1) dim))
    (usage-error "~A: expected ~D columns, got an array of dimensions ~S"
                 name dim (array-dimensions data)))
  (when (and (arrayp data) (> (array-rank data) 2))
    (usage-error "~A: expected a vector or a 2-D array, got dimensions ~S"
                 name (array-dimensions data)))
  (let ((v (float-vector data name)))
    (unless (and (plusp dim) (zerop (mod (length v) dim)))
      (usage-error "~A: ~D floats is not a whole number of rows of ~D"
                   name (length v) dim))
    (values v (floor (length v) dim))))

(defun output-vector (given length element-type name)
  "GIVEN (checked: exact element type and length) or a fresh vector."
  (cond ((null given) (make-array length :element-type element-type))
        ((cffi:pointerp given) given)
        ((and (typep given `(simple-array ,element-type (*))) (= (length given) length)) given)
        (t (usage-error "~A must be a (simple-array ~S (~D)) or a foreign pointer"
                        name element-type length))))

(defun call-with-pointer (object function)
  (cond ((null object) (funcall function (cffi:null-pointer)))
        ((cffi:pointerp object) (funcall function object))
        (t (cffi:with-pointer-to-vector-data (pointer object)
             (funcall function pointer)))))

(defmacro with-pointers (bindings &body body)
  "Bind each VAR to a pointer to the data of its vector (pinned, zero copy),
NIL -> NULL, a foreign pointer -> itself."
  (if (null bindings)
      `(progn ,@body)
      (destructuring-bind ((var object) &rest more) bindings
        `(call-with-pointer ,object (lambda (,var) (with-pointers ,more ,@body))))))
